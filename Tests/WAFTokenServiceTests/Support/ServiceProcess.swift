import AsyncHTTPClient
import Foundation
import NIOCore
import WAFLocalTokenService

/// The directory of the built products: on Linux the test binary is
/// `<products>/waf-tokendPackageTests.xctest`, whatever the scratch path.
let productsDirectory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()

enum TestProcessError: Error, CustomStringConvertible {
    case noListeningLine(String)

    var description: String {
        switch self {
        case .noListeningLine(let output): "the service printed no listening line; it said: \(output)"
        }
    }
}

/// A real `waf-token-service` child process, stopped with SIGTERM when the test is done.
final class ServiceProcess: @unchecked Sendable {
    let process = Process()
    /// The application integration URL it printed.
    let url: String
    /// `http://127.0.0.1:PORT`
    let origin: String
    let http = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup)

    init(_ arguments: [String] = []) throws {
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

    func stop() async {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? await http.shutdown()
    }

    // MARK: Administration over HTTP, as a script would do it

    func arm(_ rules: FaultRule...) async throws {
        var request = HTTPClientRequest(url: origin + "/__admin/faults")
        request.method = .POST
        request.body = .bytes(ByteBuffer(bytes: try JSONEncoder().encode(rules)))
        _ = try await http.execute(request, timeout: .seconds(5))
    }

    func counters() async throws -> ServiceCounters {
        let response = try await http.execute(HTTPClientRequest(url: origin + "/__admin/counters"), timeout: .seconds(5))
        let body = try await response.body.collect(upTo: 16 << 20)
        return try JSONDecoder().decode(ServiceCounters.self, from: Data(body.readableBytesView))
    }

    /// Clears armed faults and latency.
    func reset() async throws {
        var request = HTTPClientRequest(url: origin + "/__admin/faults")
        request.method = .DELETE
        _ = try await http.execute(request, timeout: .seconds(5))
    }

    /// The token-service calls the service saw, in order, as "endpoint status outcome"
    /// ("inputs 503 fault: fail", "verify 200 token"; status "-" when none was sent).
    func calls() async throws -> [String] {
        try await counters().calls.filter { $0.endpoint != "protected" }.map {
            "\($0.endpoint) \($0.status.map(String.init) ?? "-") \($0.outcome)"
        }
    }

    /// GET /protected/… with the token as a cookie (or without one).
    func protected(cookie token: String?, path: String = "/protected/x") async throws -> (status: UInt, action: String?) {
        try await protected(path: path, headers: token.map { [("Cookie", "aws-waf-token=\($0)")] } ?? [])
    }

    /// GET /protected/… with the token in the x-aws-waf-token header.
    func protected(header token: String, path: String = "/protected/x") async throws -> (status: UInt, action: String?) {
        try await protected(path: path, headers: [("x-aws-waf-token", token)])
    }

    private func protected(path: String, headers: [(String, String)]) async throws -> (status: UInt, action: String?) {
        var request = HTTPClientRequest(url: origin + path)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await http.execute(request, timeout: .seconds(5))
        return (response.status.code, response.headers["x-amzn-waf-action"].first)
    }
}

/// Reads one line, byte by byte, so that nothing after it is consumed from the pipe.
private func readLine(from handle: FileHandle) -> String? {
    var bytes: [UInt8] = []
    while true {
        guard let byte = try? handle.read(upToCount: 1), let first = byte.first else {
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
        if first == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
        bytes.append(first)
    }
}
