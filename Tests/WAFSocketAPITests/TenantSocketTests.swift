import Logging
import NIOCore
import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry
@testable import WAFSocketAPI

/// Tenants kept apart at every moment, on the socket's own pipeline: a reload held between its
/// steps, a kept-alive connection after its lists changed, control, forced refreshes, names.
@Suite("Tenants on the socket, on an EmbeddedChannel", .offPool)
struct TenantSocketTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })
    static let otherIdentity = try! WAFConfiguration(
        applicationIntegrationUrl: "https://fedcba987654.us-east-1.sdk.awswaf.com/fedcba987654/fedcba987654/", domainName: "example.com")

    @Test(
        "TENANT2: a reload held between its steps (the provider switched and fetched, the entry not yet): no token goes out; then the new lists decide"
    )
    func TENANT2_reloadBetweenItsSteps() throws {
        let socket = try EmbeddedSocket()
        let entry = try #require(socket.api.providers.named("default"))
        #expect(try socket.exchange(TokenFastPathHandlerTests.plain).contains("token-1"))
        // Step 1 of the reload: the provider takes the new identity and, before the entry takes the
        // new lists, already holds that identity's token.
        socket.provider.reconfigure(Self.otherIdentity, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        socket.settle()
        #expect(socket.provider.cachedToken()?.token.value == "token-2", "the new identity's token is there")
        // Held here: the entry still holds the old identity and lists, under which token-2 was
        // never fetched. Nothing hands it out: the fast path, the codec path, a request that waited.
        for request in [
            TokenFastPathHandlerTests.plain, "GET /v1/token?wait=5 HTTP/1.1\r\n\r\n", "GET /v1/cookie HTTP/1.1\r\n\r\n",
            "GET /v1/token HTTP/1.1\r\nAccept: text/plain\r\nConnection: keep-alive\r\n\r\n",
        ] {
            let answer = try socket.exchange(request)
            #expect(answer.statusCodes == [503] && !answer.contains("token-2"), "\(request): \(answer)")
        }
        // Step 3: the entry takes the new identity, with lists that shut uid 1000 out.
        entry.update(
            .init(
                identity: Self.otherIdentity.identity, domainName: "example.com",
                access: AccessPolicy(allowedUsers: ["0"], allowedGroups: [], logger: Self.quiet)))
        // No advance by hand: the entry's update moves the generation itself, so the fast path's
        // cached decision is out of date the moment the new lists apply.
        let refused = try socket.exchange(TokenFastPathHandlerTests.plain)
        #expect(refused.statusCodes == [403] && !refused.contains("token-2"))
        // With lists that let it in, the new identity's token.
        let allowed = try EmbeddedSocket()
        let other = try #require(allowed.api.providers.named("default"))
        allowed.provider.reconfigure(Self.otherIdentity, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        allowed.settle()
        other.update(.init(identity: Self.otherIdentity.identity, domainName: "example.com", access: other.access))
        #expect(try allowed.exchange(TokenFastPathHandlerTests.plain).contains("token-2"))
    }

    @Test("TENANT2: a token event of an identity the entry does not answer for yet reaches no stream; once the entry does, it goes out")
    func TENANT2_eventsBetweenTheSteps() throws {
        let socket = try EmbeddedSocket()
        let entry = try #require(socket.api.providers.named("default"))
        _ = try socket.exchange("GET /v1/events HTTP/1.1\r\n\r\n")
        socket.provider.reconfigure(Self.otherIdentity, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        socket.settle()
        let token = try #require(socket.provider.cachedToken()?.token)
        socket.api.events.publish(.tokenUpdated(token, origin: .fetched), provider: "default")
        socket.settle()
        #expect(!(try socket.written()).contains("token-2"), "not under the old lists")
        entry.update(.init(identity: Self.otherIdentity.identity, domainName: "example.com", access: entry.access))
        socket.api.events.publish(.tokenUpdated(token, origin: .fetched), provider: "default")
        socket.settle()
        #expect(try socket.written().contains("token-2"), "under its own identity")
    }

    @Test("TENANT3: a kept-alive connection is checked again on its next request once the socket's lists change")
    func TENANT3_keptAliveCheckedAgain() throws {
        let socket = try EmbeddedSocket()
        #expect(try socket.exchange(TokenFastPathHandlerTests.plain).statusCodes == [200])
        socket.api.settings = ConnectionSettings(
            policy: AccessPolicy(allowedUsers: ["0"], allowedGroups: [], logger: Self.quiet), idleTimeout: .seconds(60), requestTimeout: .seconds(10))
        socket.api.generation.advance()
        let answer = try socket.exchange(TokenFastPathHandlerTests.plain)
        #expect(answer.statusCodes == [403] && !answer.contains("token-1"))
        #expect(!socket.isOpen, "closed after its 403")
    }

    @Test("TENANT5: PUT /v1/lifecycle from a peer not allowed for every provider is 403 and moves nothing; lifecycle.allowedUsers lets one in")
    func TENANT5_lifecycleControl() throws {
        let socket = try EmbeddedSocket(pay: true, payAllowedUsers: ["0"])
        let put = "PUT /v1/lifecycle HTTP/1.1\r\nContent-Length: 10\r\n\r\nbackground"
        let refused = try socket.exchange(put)
        #expect(refused.statusCodes == [403])
        #expect(socket.provider.status().lifecycle.state == .foreground && socket.extra?.status().lifecycle.state == .foreground)
        let control = try EmbeddedSocket(pay: true, payAllowedUsers: ["0"])
        control.api.lifecycleAccess = AccessPolicy(allowedUsers: ["1000"], allowedGroups: [], logger: Self.quiet)
        #expect(try control.exchange(put).statusCodes == [200])
        #expect(control.provider.status().lifecycle.state == .background && control.extra?.status().lifecycle.state == .background)
        let everyProvider = try EmbeddedSocket(pay: true)
        #expect(try everyProvider.exchange(put).statusCodes == [200], "a peer allowed for every provider may")
    }

    @Test("TENANT4: forced refreshes fetch once per interval; those during the fetch join it, those after get the token fetched last")
    func TENANT4_forcedRefreshesCoalesce() throws {
        let socket = try EmbeddedSocket()
        let entry = try #require(socket.api.providers.named("default"))
        entry.forcedRefresh.interval = .seconds(300)
        let refresh = "POST /v1/refresh HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
        let calls = socket.service.calls.count
        // Two at once: one fetch, both answered with its token.
        let together = try socket.exchange(refresh + refresh)
        #expect(together.statusCodes == [200, 200] && together.components(separatedBy: "token-2").count == 3, "\(together)")
        // Thirty more inside the interval: no fetch, the token fetched last.
        for _ in 0..<30 {
            let answer = try socket.exchange(refresh)
            #expect(answer.statusCodes == [200] && answer.contains("token-2"))
        }
        #expect(socket.service.calls.count == calls + 1, "one fetch for 32 forced refreshes")
        entry.forcedRefresh.interval = .zero
        #expect(try socket.exchange(refresh).contains("token-3"), "0 turns the limit off")
    }

    @Test("TENANT4: inside the interval after a forced refresh that failed, the same failure with Retry-After, never the old token as refreshed")
    func TENANT4_failureAnsweredAsFailure() throws {
        let socket = try EmbeddedSocket(failingAfterFirst: true)
        let entry = try #require(socket.api.providers.named("default"))
        entry.forcedRefresh.interval = .seconds(300)
        let refresh = "POST /v1/refresh HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
        _ = try socket.exchange(refresh)
        // Its retries (RET-1…3) in virtual time, until the provider gives up.
        for _ in 0..<20 {
            socket.scheduler.advance(by: .seconds(60))
            socket.settle()
        }
        let first = try socket.written()
        #expect(first.statusCodes == [503] && !first.contains("token-1"), "the forced fetch failed: \(first)")
        let calls = socket.service.calls.count
        let second = try socket.exchange(refresh)
        #expect(second.statusCodes == [503] && !second.contains("token-1"), "inside the interval: the same failure: \(second)")
        let retryAfter = second.split(separator: "\r\n").first { $0.hasPrefix("Retry-After: ") }.flatMap { Int($0.dropFirst(13)) }
        #expect(retryAfter.map { (290...300).contains($0) } == true, "for the rest of the interval: \(second)")
        #expect(socket.service.calls.count == calls, "and no fetch")
        #expect(try socket.exchange("GET /v1/token HTTP/1.1\r\n\r\n").contains("token-1"), "the last good token stays cached (TOK-5)")
    }

    @Test(
        "TENANT7: /readyz and a 403 name no provider the peer may not use; a name or a domain it may not use and one no provider has get the same answer"
    )
    func TENANT7_namesHidden() throws {
        let socket = try EmbeddedSocket(tokenFirst: false, pay: true, payAllowedUsers: ["0"])
        let ready = try socket.exchange("GET /readyz HTTP/1.1\r\n\r\n")
        #expect(ready.statusCodes == [503] && ready.contains("default") && !ready.contains("pay"), "\(ready)")
        // pay's domain, below default's example.com: answered as any other name below example.com,
        // by default's token; pay neither answers nor shadows it.
        let domain = try socket.exchange("GET /v1/token?domain=api.pay.example.com HTTP/1.1\r\n\r\n")
        let sibling = try socket.exchange("GET /v1/token?domain=api.shop.example.com HTTP/1.1\r\n\r\n")
        #expect(domain.statusCodes == [503] && !domain.contains("pay"), "default's answer (no token yet here): \(domain)")
        #expect(Self.withoutAge(domain) == Self.withoutAge(sibling), "\(domain) against \(sibling)")
        let noDomain = try socket.exchange("GET /v1/token?domain=nowhere.example.net HTTP/1.1\r\n\r\n")
        #expect(noDomain.statusCodes == [403] && !noDomain.contains("pay"), "\(noDomain)")
        let named = try socket.exchange("GET /v1/token?provider=pay HTTP/1.1\r\n\r\n")
        let unknown = try socket.exchange("GET /v1/token?provider=nope HTTP/1.1\r\n\r\n")
        #expect(named.statusCodes == [403] && !named.contains("pay"), "\(named)")
        #expect(Self.withoutDate(unknown) == Self.withoutDate(named), "\(unknown) against \(named)")
    }

    /// An answer's text without its Date header and token age, which move with the clock.
    static func withoutAge(_ answer: String) -> String {
        withoutDate(answer).replacing(/"ageSeconds":[0-9]+/, with: "")
    }

    /// An answer's text without its Date header, which moves with the second.
    static func withoutDate(_ answer: String) -> String {
        answer.split(separator: "\r\n", omittingEmptySubsequences: false).filter { !$0.lowercased().hasPrefix("date:") }.joined(separator: "\r\n")
    }
}
