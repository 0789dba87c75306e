import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP/1.1 exchange with the daemon over its Unix socket, on SwiftNIO: a connection per call
/// (a local connect costs microseconds), closed once the answer is read.
struct DaemonConnection: Sendable {
    let socketPath: String
    /// The largest answer read whole; the daemon's are a few kilobytes.
    static let maximumBody = 1 << 20

    private typealias Channel = NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>

    /// Sends one request and returns the answer's status and body, or throws
    /// `WAFTokenClientError.timedOut` when `timeout` passes first.
    func exchange(_ path: String, method: HTTPMethod, accept: String?, body: [UInt8]?, timeout: Duration) async throws -> (UInt, [UInt8]) {
        try await withDeadline(timeout) {
            try await connect().executeThenClose { inbound, outbound in
                // The daemon may answer a complete head and close (`Connection: close`) before the
                // rest of the request is written: that write then fails although the answer is
                // there. The answer counts; the write's error only when no answer came.
                var sendError: (any Error)?
                do {
                    try await send(path, method: method, accept: accept, body: body, outbound)
                } catch {
                    sendError = error
                }
                var status: UInt = 0
                var answer: [UInt8] = []
                for try await part in inbound {
                    switch part {
                    case .head(let head): status = head.status.code
                    case .body(let bytes):
                        guard answer.count + bytes.readableBytes <= Self.maximumBody else {
                            throw WAFTokenClientError.badResponse("an answer over 1 MiB")
                        }
                        answer += bytes.readableBytesView
                    case .end: return (status, answer)
                    }
                }
                throw sendError ?? WAFTokenClientError.badResponse("the connection closed before the answer was complete")
            }
        }
    }

    /// Sends a GET and hands the body to `onChunk` as it arrives, after `onHead` accepted the status
    /// (it gets the whole body of an answer that is not 200).
    func stream(
        _ path: String, accept: String, onHead: (UInt, [UInt8]) throws -> Void,
        onChunk: (inout ServerSentEventParser, ByteBufferView) throws -> Void
    ) async throws {
        try await connect().executeThenClose { inbound, outbound in
            try await send(path, method: .GET, accept: accept, body: nil, outbound)
            var status: UInt = 0
            var parser = ServerSentEventParser()
            var refused: [UInt8] = []
            for try await part in inbound {
                switch part {
                case .head(let head):
                    status = head.status.code
                case .body(let bytes):
                    if status == 200 { try onChunk(&parser, bytes.readableBytesView) } else { refused += bytes.readableBytesView.prefix(64 * 1024) }
                case .end:
                    if status != 200 { try onHead(status, refused) }
                    return
                }
            }
        }
    }

    private func connect() async throws -> Channel {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton).connect(unixDomainSocketPath: socketPath) { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHTTPClientHandlers()
                return try Channel(wrappingChannelSynchronously: channel)
            }
        }
    }

    private func send(
        _ path: String, method: HTTPMethod, accept: String?, body: [UInt8]?, _ outbound: NIOAsyncChannelOutboundWriter<HTTPClientRequestPart>
    ) async throws {
        var headers: HTTPHeaders = ["Host": "localhost", "Connection": "close"]
        if let accept { headers.add(name: "Accept", value: accept) }
        if let body { headers.add(name: "Content-Length", value: String(body.count)) }
        try await outbound.write(.head(HTTPRequestHead(version: .http1_1, method: method, uri: path, headers: headers)))
        if let body { try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body)))) }
        try await outbound.write(.end(nil))
    }
}

/// `body`'s result, or `WAFTokenClientError.timedOut` once `timeout` passed.
func withDeadline<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            throw WAFTokenClientError.timedOut("the daemon did not answer within \(timeout)")
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
