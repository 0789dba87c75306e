import AsyncHTTPClient
import Foundation
import NIOCore
import WAFLocalTokenService

/// The directory of the built products: on Linux the test binary is
/// `<products>/waf-tokendPackageTests.xctest`, whatever the scratch path.
public let productsDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()

/// The repository's top directory (README, config/, systemd/, scripts/, the build folders).
public let repositoryDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

public enum TestProcessError: Error, CustomStringConvertible {
    case noListeningLine(String)

    public var description: String {
        switch self {
        case .noListeningLine(let output): "the service printed no listening line; it said: \(output)"
        }
    }
}

/// A real `waf-token-service` child process, stopped with SIGTERM when the test is done.
public final class ServiceProcess: @unchecked Sendable {
    public let process = Process()
    /// The application integration URL it printed.
    public let url: String
    /// `http://127.0.0.1:PORT`
    public let origin: String
    public let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup)

    public init(_ arguments: [String] = []) throws {
        process.executableURL = productsDirectory.appendingPathComponent("waf-token-service")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        guard let line = readLine(from: output.fileHandleForReading), line.hasPrefix("listening on ") else {
            process.terminate()
            throw TestProcessError.noListeningLine(String(describing: readLine(from: output.fileHandleForReading)))
        }
        url = String(line.dropFirst("listening on ".count))
        let afterScheme = url.split(separator: "/", maxSplits: 3)
        origin = "\(afterScheme[0])//\(afterScheme[1])"
    }

    deinit {
        // A test that threw before stop(): end the child and the client rather than trap.
        if process.isRunning { process.terminate() }
        let http = http
        Task { try? await http.shutdown() }
    }

    /// SIGTERM, then SIGKILL after 10 s; bounded. Not Foundation's `waitUntilExit`, which off the
    /// main thread spins a run loop with nothing in it at full speed, starving the other tests.
    public func stop() async {
        if process.isRunning {
            process.terminate()
            let deadline = ContinuousClock.now + .seconds(10)
            while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                let killed = ContinuousClock.now + .seconds(10)
                while process.isRunning, ContinuousClock.now < killed { try? await Task.sleep(for: .milliseconds(20)) }
            }
        }
        try? await http.shutdown()
    }

    // MARK: Administration over HTTP, as a script would do it

    public func arm(_ rules: FaultRule...) async throws {
        var request = HTTPClientRequest(url: origin + "/__admin/faults")
        request.method = .POST
        request.body = .bytes(ByteBuffer(bytes: try JSONEncoder().encode(rules)))
        _ = try await http.execute(request, timeout: .seconds(5))
    }

    /// Refuses every token minted so far at the protected resource (the web ACL's key rotated).
    public func rotateKey() async throws {
        var request = HTTPClientRequest(url: origin + "/__admin/rotate")
        request.method = .POST
        _ = try await http.execute(request, timeout: .seconds(5))
    }

    /// The protected resource asks every request for a CAPTCHA (`on`), or no longer.
    public func askForCaptcha(_ on: Bool) async throws {
        var request = HTTPClientRequest(url: origin + "/__admin/captcha")
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: on ? "true" : "false"))
        _ = try await http.execute(request, timeout: .seconds(5))
    }

    /// Delays every token-service answer by `milliseconds` from now on.
    public func setLatency(milliseconds: Int) async throws {
        var request = HTTPClientRequest(url: origin + "/__admin/faults")
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: #"{"latencyMilliseconds": \#(milliseconds)}"#))
        _ = try await http.execute(request, timeout: .seconds(5))
    }

    public func counters() async throws -> ServiceCounters {
        let response = try await http.execute(HTTPClientRequest(url: origin + "/__admin/counters"), timeout: .seconds(5))
        let body = try await response.body.collect(upTo: 16 << 20)
        return try JSONDecoder().decode(ServiceCounters.self, from: Data(body.readableBytesView))
    }

    /// Every token the service issued so far (its test-tool record).
    public func mintedTokens() async throws -> [String] {
        let response = try await http.execute(HTTPClientRequest(url: origin + "/__admin/tokens"), timeout: .seconds(5))
        let body = try await response.body.collect(upTo: 16 << 20)
        return try JSONDecoder().decode([String].self, from: Data(body.readableBytesView))
    }

    /// Clears armed faults and latency.
    public func reset() async throws {
        var request = HTTPClientRequest(url: origin + "/__admin/faults")
        request.method = .DELETE
        _ = try await http.execute(request, timeout: .seconds(5))
    }

    /// The token-service calls the service saw, in order, as "endpoint status outcome"
    /// ("inputs 503 fault: fail", "verify 200 token"; status "-" when none was sent).
    public func calls() async throws -> [String] {
        try await counters().calls.filter { $0.endpoint != "protected" }.map {
            "\($0.endpoint) \($0.status.map(String.init) ?? "-") \($0.outcome)"
        }
    }

    /// GET /protected/… with the token as a cookie (or without one).
    public func protected(cookie token: String?, path: String = "/protected/x") async throws -> (status: UInt, action: String?) {
        try await protected(path: path, headers: token.map { [("Cookie", "aws-waf-token=\($0)")] } ?? [])
    }

    /// GET /protected/… with the token in the x-aws-waf-token header.
    public func protected(header token: String, path: String = "/protected/x") async throws -> (status: UInt, action: String?) {
        try await protected(path: path, headers: [("x-aws-waf-token", token)])
    }

    private func protected(path: String, headers: [(String, String)]) async throws -> (status: UInt, action: String?) {
        var request = HTTPClientRequest(url: origin + path)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await http.execute(request, timeout: .seconds(5))
        return (response.status.code, response.headers["x-amzn-waf-action"].first)
    }
}

/// Reads one line, byte by byte, so that nothing after it is consumed from the pipe; read(2)
/// retried on EINTR (Foundation's FileHandle traps on it, and SIGCHLD causes it).
private func readLine(from handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while true {
        let count = read(handle.fileDescriptor, &byte, 1)
        if count < 0, errno == EINTR { continue }
        guard count == 1 else { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
        if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(byte)
    }
}
