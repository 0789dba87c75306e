import Foundation
import Testing
import WAFDaemonTransport
import WAFTestSupport

#if canImport(Glibc)
import Glibc
#endif

extension ErrorCatalogTests {
    /// Two providers (pay for root only), each with a proxy: default's to an upstream that answers
    /// or closes, pay's to one that never answers. Reading, routing, selecting, the token's
    /// answers with a token, and the proxies' own.
    static func twoProvidersAndProxies(_ walk: Walk) async throws {
        let directory = try scratchDirectory("waf-error-catalog")
        let proxy = directory.appendingPathComponent("default.sock").path
        let payProxy = directory.appendingPathComponent("pay.sock").path
        let silent = try await SilentUpstream()
        let scripted = try await ScriptedUpstream { path in
            path == "/close" ? .init("", close: true) : .init("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
        let configuration = """
                allowedUsers: [root]
                proxy:
                  listen: \(payProxy)
                  mode: "0666"
                  upstream: \(silent.origin)/
                  upstreamTimeoutSec: 1
            tokenCookiePath: /api
            proxy:
              listen: \(proxy)
              mode: "0666"
              upstream: \(scripted.origin)/

            """
        let arguments = ["--socket-mode", "0666", "--socket-request-timeout-sec", "2"]
        try await withTwoProviders(configuration: configuration, arguments: arguments) { _, _, daemon in
            let socket = daemon.socketPath
            let big = "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 64 * 1024) + "\r\n\r\n"
            walk.check(.headTooLarge, try raw(socket, big), "a 64 KiB head")
            walk.check(.unsupportedVersion, try raw(socket, "GET /v1/status HTTP/2.0\r\nHost: x\r\n\r\n"), "HTTP/2.0")
            walk.check(
                .malformed(""), try raw(socket, "GARBAGE\r\n\r\n"), exact: false, prefix: "malformed request: ", closes: true, "no request line")
            walk.check(.timedOut, try raw(socket, "GET /v1/status HTTP/1.1\r\nHost: x\r\n", timeout: .seconds(6)), closes: true, "half a head")
            let huge = "PUT /v1/lifecycle HTTP/1.1\r\nHost: x\r\nContent-Length: 20000\r\n\r\n" + String(repeating: "a", count: 20000)
            walk.check(.bodyTooLarge(limit: 8 * 1024), try raw(socket, huge), "a 20,000-byte body")
            walk.check(.badTarget, try raw(socket, "GET /v1/status?a=%zz HTTP/1.1\r\nHost: x\r\n\r\n"), "a bad escape")
            walk.check(.noSuchEndpoint(path: "/v1/nothing"), try await ask(socket, "/v1/nothing"), "an unknown path")
            walk.check(.methodNotAllowed(path: "/v1/token", allow: "GET, HEAD"), try await ask(socket, "/v1/token", ["-X", "DELETE"]), "DELETE")
            walk.check(
                .lifecycleForbidden, try await ask(socket, "/v1/lifecycle", ["-X", "PUT", "-d", "foreground"], uid: nobody), closes: true,
                "nobody moves every provider")
            walk.check(
                .noneVisible(selector: "?provider=", choices: ["default"]), try await ask(socket, "/v1/token?provider=pay", uid: nobody),
                "nobody asks for pay")
            walk.check(.bothSelectors, try await ask(socket, "/v1/token?provider=default&domain=x.example"), "two selectors")
            walk.check(
                .unknownProvider(name: "nope", choices: ["default", "pay"]), try await ask(socket, "/v1/token?provider=nope"), "no such name")
            walk.check(
                .unknownDomain(domain: "nope.example", choices: ["default", "pay"]), try await ask(socket, "/v1/token?domain=nope.example"),
                "no such domain")
            walk.check(.badWait("abc", maximum: 3600), try await ask(socket, "/v1/token?wait=abc"), "wait=abc")
            walk.check(.badLifecycle, try await ask(socket, "/v1/lifecycle", ["-X", "PUT", "-d", "sideways"]), "a lifecycle of no kind")
            walk.check(.badCookiePath("nope"), try await ask(socket, "/v1/cookie?path=nope"), "a path without /")
            walk.check(
                .badForwardedHeaders("X-Forwarded-Uri and X-Original-URI name different requests; no token for an ambiguous request"),
                try await ask(socket, "/v1/auth", ["-H", "X-Forwarded-Uri: /a", "-H", "X-Original-URI: /b"]), "two forwarded URIs")
            #expect(try await curl(socket, "/v1/token?wait=20").code == 200)
            #expect(try await curl(socket, "/v1/token?wait=20&provider=pay").code == 200)
            walk.check(.noCookie(path: "/elsewhere", cookiePath: "/api"), try await ask(socket, "/v1/cookie?path=/elsewhere"), "outside /api")

            walk.check(
                .connectNotSupported, try raw(proxy, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"), closes: true, "CONNECT")
            walk.check(.proxyForbidden, try await ask(payProxy, "/x", uid: nobody), closes: true, "nobody through pay's proxy")
            walk.check(.upstreamTimedOut(seconds: 1), try await ask(payProxy, "/slow"), "an upstream that never answers")
            walk.check(.upstreamClosed, try await ask(proxy, "/close"), "an upstream that closes")
            await scripted.stop()
            walk.check(
                .upstreamUnreachable(url: scripted.origin), try await ask(proxy, "/gone"), exact: false,
                prefix: "cannot reach the upstream http://127.0.0.1:",
                "an upstream gone")
            // A proxy's own error to a HEAD is its head alone: a body would be read as the next answer.
            let head = try raw(proxy, "HEAD /gone HTTP/1.1\r\nHost: x\r\n\r\n", timeout: .seconds(2))
            #expect(head.code == 502 && !head.text.contains("upstreamUnreachable"), "a HEAD gets the head alone: \(head.text)")
            // Refused before its exchange exists, too.
            let refused = try raw(proxy, "HEAD /a%2fb HTTP/1.1\r\nHost: x\r\n\r\n", timeout: .seconds(2))
            #expect(refused.code == 400 && !refused.text.contains("badRequest"), "a HEAD refused gets the head alone: \(refused.text)")
            let unframed = try raw(proxy, "HEAD /x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", timeout: .seconds(2))
            #expect(unframed.code == 400 && !unframed.text.contains("badRequest"), "a HEAD of two lengths gets the head alone: \(unframed.text)")
        }
        await silent.stop()
        await scripted.stop()
    }

    /// One provider, named and for root only, whose token service fails every call, the cookie
    /// off: the answers without a token.
    static func noTokenEver(_ walk: Walk) async throws {
        let configuration = { (service: ServiceProcess) in
            """
            setTokenCookie: false
            auth:
              tokenWaitSec: 1
            providers:
              shop:
                applicationIntegrationUrl: \(service.url)
                domainName: 127.0.0.1
                allowedUsers: [root]

            """
        }
        try await withNamedProviders(service: ["--fail-next", "1000000"], configuration) { socket in
            walk.check(.providerForbidden(name: nil), try await ask(socket, "/v1/token", uid: nobody), "nobody, no selector")
            walk.check(.cookieOff, try await ask(socket, "/v1/cookie"), "setTokenCookie: false")
            walk.check(.noToken, try await ask(socket, "/v1/token"), "no token yet")
            walk.check(.notReady(named: []), try await ask(socket, "/readyz"), "no token, not ready")
            walk.check(.noTokenWithinAuthWait, try await ask(socket, "/v1/auth"), "forward auth without a token")
            let failed = try await ask(socket, "/v1/token?wait=20")
            // The SdkError after RET-3's retries, with its own words.
            walk.check(
                .fetchFailed(name: "allRetriesFailed", description: "", retryAfter: 1), failed, exact: false, prefix: "", "every fetch fails")
            #expect(failed.text.contains(#""message":""#) && !failed.text.contains(#""message":"""#), "the SdkError's description: \(failed.text)")
        }
    }

    /// Two named providers (no default), a socket for root only, and a token service that never
    /// answers: a selector required, waits that end, and a stop.
    static func stalledService(_ walk: Walk) async throws {
        let configuration = { (service: ServiceProcess) in
            """
            socket:
              allowedUsers: [root]
            providers:
              shop:
                applicationIntegrationUrl: \(service.url)
                domainName: 127.0.0.1
              mall:
                applicationIntegrationUrl: \(service.url)
                domainName: localhost

            """
        }
        try await withNamedProviders(service: ["--stall-next", "1000000"], configuration) { socket in
            walk.check(.socketForbidden, try await ask(socket, "/v1/status", uid: nobody), closes: true, "nobody on a socket for root")
            walk.check(.providerRequired(choices: ["mall", "shop"]), try await ask(socket, "/v1/token"), "no selector, no default")
            walk.check(.waitTimedOut(wait: "1"), try await ask(socket, "/v1/token?wait=1&provider=shop"), "a wait that ends")
        } stopping: { socket, daemon in
            async let waiting = ask(socket, "/v1/token?wait=30&provider=shop")
            try await Task.sleep(for: .milliseconds(500))
            daemon.signal(SIGTERM)
            walk.check(.stopping, try await waiting, "a wait when the daemon stops")
        }
    }

    /// A token service with `service` arguments and a daemon whose providers `configuration`
    /// names (none at the top level); `stopping` runs last, and may stop the daemon itself.
    private static func withNamedProviders(
        service arguments: [String], _ configuration: (ServiceProcess) -> String, _ body: (String) async throws -> Void,
        stopping: ((String, DaemonProcess) async throws -> Void)? = nil
    ) async throws {
        let service = try ServiceProcess(arguments)
        var failure: (any Error)?
        do {
            let daemon = try await DaemonProcess.serving(service: nil, arguments: ["--socket-mode", "0666"], configFile: configuration(service))
            do {
                try await body(daemon.socketPath)
                try await stopping?(daemon.socketPath, daemon)
            } catch {
                failure = error
            }
            await daemon.stop()
        } catch {
            failure = error
        }
        await service.stop()
        if let failure { throw failure }
    }
}
