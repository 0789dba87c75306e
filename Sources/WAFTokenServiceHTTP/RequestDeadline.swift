import WAFTokenCore

/// One token-service request, connect, head and body together, ends within the timeout.
///
/// AsyncHTTPClient's deadline ends when the answer's head has arrived, and its read timeout
/// bounds only the silence between two reads: a service that trickles its body a byte at a time
/// held an attempt, and with single flight every waiter and refresh behind it, for as long as it
/// kept trickling (minutes, measured). Here the whole exchange races a timer; when the timer wins,
/// the exchange is cancelled (which cancels the request in the client) and the attempt fails as
/// any failed attempt does (RET-1).
enum RequestDeadline {
    static func run<T: Sendable>(
        within limit: Duration, timedOut: @autoclosure () -> SdkError, _ exchange: @escaping @Sendable () async throws(SdkError) -> T
    ) async throws(SdkError) -> T {
        let first = await withTaskGroup(of: Result<T, SdkError>?.self) { group in
            group.addTask {
                do throws(SdkError) {
                    return .success(try await exchange())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        switch first {
        case .success(let value)?: return value
        case .failure(let error)?: throw error
        case nil where Task.isCancelled: throw .unexpected(CancellationError())
        case nil: throw timedOut()
        }
    }
}
