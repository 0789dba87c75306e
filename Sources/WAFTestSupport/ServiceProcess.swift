import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL
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

/// A real `waf-token-service` child process, stopped with SIGTERM when the test is done. Started
/// with posix_spawn and reaped by its pid (`SpawnedProcess`), as every child of the suite.
public final class ServiceProcess: @unchecked Sendable {
    private let child: SpawnedProcess
    /// The application integration URL it printed.
    public let url: String
    /// `http://127.0.0.1:PORT`
    public let origin: String
    /// The test's own client of its administration routes. It does not check the certificate
    /// of a service serving https (`--tls-cert`): what the test checks is the daemon's client.
    public let http: HTTPClient = {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .none
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: .init(tlsConfiguration: tls))
    }()

    /// Starts the service and reads the URL from its first line (20 s at most).
    public init(_ arguments: [String] = []) throws {
        let output = try scratchDirectory("waf-token-service").appendingPathComponent("stdout").path
        child = try SpawnedProcess(
            productsDirectory.appendingPathComponent("waf-token-service").path, arguments, output: output, errors: "/dev/null",
            diagnosed: false)
        let deadline = ContinuousClock.now + .seconds(20)
        var said = ""
        while ContinuousClock.now < deadline, !said.contains("\n"), child.exitStatus == nil {
            usleep(5_000)
            said = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        }
        guard let line = said.split(separator: "\n").first, line.hasPrefix("listening on ") else {
            child.signal(SIGKILL)
            throw TestProcessError.noListeningLine(said)
        }
        url = String(line.dropFirst("listening on ".count))
        let afterScheme = url.split(separator: "/", maxSplits: 3)
        origin = "\(afterScheme[0])//\(afterScheme[1])"
    }

    deinit {
        // A test that threw before stop(): the child is killed as it goes (SpawnedProcess), and
        // the client shut down rather than trap.
        let http = http
        Task { try? await http.shutdown() }
    }

    /// SIGTERM, then SIGKILL after 10 s; bounded.
    public func stop() async {
        if child.exitStatus == nil { await child.stop(grace: .seconds(10)) }
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

    /// The protected resource challenges a token used from another address than it was fetched
    /// from (`on`), or no longer: Bot Control's token-reuse rule (EGRESS-1).
    public func bindTokensToAddresses(_ on: Bool) async throws {
        var request = HTTPClientRequest(url: origin + "/__admin/bind-addresses")
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: on ? "true" : "false"))
        _ = try await http.execute(request, timeout: .seconds(10))
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
