import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOSSL

/// One request of the canary: the URL with the token as the proxy would send it (the
/// `aws-waf-token` cookie where COOK-1's path covers the URL, else the `x-aws-waf-token` header; the
/// header when the proxy's `tokenIn` says so), the answer classified by AWS WAF's
/// `x-amzn-waf-action` header (docs/canary.md).
public struct CanaryProbe: Sendable {
    public enum Placement: Sendable {
        case cookie, header
    }

    let client: HTTPClient
    let url: String
    let method: HTTPMethod
    let timeout: TimeAmount

    public init(client: HTTPClient, url: String, method: String, timeout: Duration) {
        self.client = client
        self.url = url
        self.method = method == "HEAD" ? .HEAD : .GET
        self.timeout = TimeAmount(timeout)
    }

    /// Asks with `token`, placed as `placement` says, within one deadline from the connect to the
    /// last byte read (CANARY-8): a URL that never answers, or answers a byte at a time, is
    /// `unreachable` once `timeout` passed, and the request is cancelled, its connection closed.
    public func probe(token: String, placement: Placement) async -> CanaryMachine.Result {
        await withTaskGroup(of: CanaryMachine.Result?.self) { group in
            group.addTask { await ask(token: token, placement: placement) }
            group.addTask { [timeout] in
                try? await Task.sleep(for: .nanoseconds(timeout.nanoseconds))
                return Task.isCancelled ? nil : .unreachable
            }
            // The first to end decides; the other is cancelled (a request in flight with it).
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .unreachable
        }
    }

    private func ask(token: String, placement: Placement) async -> CanaryMachine.Result {
        var request = HTTPClientRequest(url: url)
        request.method = method
        switch placement {
        case .cookie: request.headers.add(name: "Cookie", value: "aws-waf-token=\(token)")
        case .header: request.headers.add(name: "x-aws-waf-token", value: token)
        }
        request.headers.add(name: "User-Agent", value: "waf-tokend-canary")
        do {
            let response = try await client.execute(request, timeout: timeout)
            // The body is not needed: read and dropped, at most 64 KiB, so the connection is reusable.
            _ = try? await response.body.collect(upTo: 65536)
            return Self.classify(response.headers["x-amzn-waf-action"].first)
        } catch {
            return .unreachable
        }
    }

    /// An answer without `x-amzn-waf-action` is accepted, whatever its status.
    static func classify(_ action: String?) -> CanaryMachine.Result {
        switch action?.lowercased() {
        case nil: .accepted
        case "captcha"?: .captcha
        default: .challenged
        }
    }
}

extension CanaryProbe {
    /// The canaries' HTTP client: the token service's trust (`tokenService.caFile`, else the
    /// system's), no redirects (a redirect's target might not be the provider's domain, and it
    /// would carry the token), `timeout` per request.
    /// `proxy`: the provider's forward proxy (EGRESS-1), nil: directly.
    public static func makeClient(caFile: String?, timeout: Duration, proxy: HTTPClient.Configuration.Proxy? = nil) throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caFile)) }
        let amount = TimeAmount(timeout)
        return HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: .init(
                tlsConfiguration: tls, redirectConfiguration: .disallow, timeout: .init(connect: amount, read: amount), proxy: proxy))
    }
}
