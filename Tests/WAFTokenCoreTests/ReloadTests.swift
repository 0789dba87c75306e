import Foundation
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

/// The Reload rules of the daemon's contract, as the provider keeps them (docs/rules.md, Reload).
@Suite("Reload", .offPool, .timeLimit(.minutes(1)))
struct ReloadTests {
    private static let otherDomain = try! WAFConfiguration(
        applicationIntegrationUrl: "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/",
        domainName: "other.example.org")

    @Test("RELOAD-1: a burst of reloads while the provider waits between attempts is no burst of requests, and the retry position stays")
    func RELOAD1_burstKeepsTheRetryPosition() {
        let harness = Harness(then: .fail(ScriptedTokenFetcher.outage))
        harness.advance(to: 0.35)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3))
        for index in 0..<1000 {
            harness.provider.reconfigure(
                .test(maxErrorTokenRefreshDelayMsec: 5000 - index % 2), lifecycleProfile: .ios, jitter: false, cookieSecure: index % 2 == 0)
        }
        harness.advance(to: 1.6)
        #expect(harness.service.callTimes == seconds(0, 0.1, 0.3, 0.7, 1.5), "the pending wait and the position in RET-1 are kept")
    }

    @Test("RELOAD-2: a new identity drops the token everywhere at once and starts over with a fetch and a fresh RET-1 sequence")
    func RELOAD2_newIdentityStartsOver() throws {
        let harness = Harness(script: [.success] + failures(4), then: .fail(ScriptedTokenFetcher.outage))
        harness.advance(to: 301.6)
        #expect(harness.service.callTimes == seconds(0, 300, 300.1, 300.3, 300.7, 301.5))
        harness.provider.reconfigure(Self.otherDomain, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.cachedToken() == nil)
        #expect(harness.provider.cookieManager.currentCookie == nil)
        let dropped = try #require(harness.persisted.all.last)
        #expect(dropped.token == nil && dropped.identity == Self.otherDomain.identity, "storage told to drop it")
        #expect(harness.events.all.contains { if case .tokenDropped = $0 { true } else { false } })
        harness.advance(to: 301.75)
        #expect(harness.service.callTimes.suffix(2) == seconds(301.6, 301.7), "a fetch at once, then 100 ms: RET-1 from the start")
        #expect(harness.service.calls.suffix(2).allSatisfy { $0.identity == Self.otherDomain.identity && $0.existingToken == nil })
    }

    @Test("RELOAD-3: a fetch of the old identity that ends after the switch is never cached, stored or overlapped")
    func RELOAD3_lateFetchOfTheOldIdentity() {
        let harness = Harness(latency: .seconds(2))
        harness.advance(to: 1)
        harness.provider.reconfigure(Self.otherDomain, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        for _ in 0..<20 {
            harness.provider.reconfigure(.test(), lifecycleProfile: .ios, jitter: false, cookieSecure: false)
            harness.provider.reconfigure(Self.otherDomain, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        }
        harness.advance(to: 10)
        #expect(harness.service.maxInFlight == 1)
        let issued = harness.service.issuedFor
        for record in harness.persisted.all {
            if let token = record.token { #expect(issued[token.value] == record.identity, "\(token.value) stored under \(record.identity)") }
        }
        #expect(harness.provider.cachedToken().map { issued[$0.token.value] } == Self.otherDomain.identity)
    }

    @Test("RELOAD-4: the same identity keeps the token and the schedule; storage gets it again for new paths and cookie settings")
    func RELOAD4_sameIdentityKeepsTheToken() throws {
        let harness = Harness()
        harness.advance(to: 10)
        let before = harness.persisted.count
        harness.provider.reconfigure(.test(tokenCookiePath: "/web"), lifecycleProfile: .ios, jitter: false, cookieSecure: true)
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.getToken()?.value == "token-1")
        let record = try #require(harness.persisted.all.last)
        #expect(harness.persisted.count == before + 1)
        #expect(record.cookie?.path == "/web" && record.cookie?.secure == true)
        #expect(harness.provider.cookieManager.cookieHeaderValue(forPath: "/") == nil)
        #expect(harness.provider.cookieManager.cookieHeaderValue(forPath: "/web/x") == "aws-waf-token=token-1")
    }

    @Test("RELOAD-5: turning background refresh off stops the periodic refresh; on again, it refreshes as a start would")
    func RELOAD5_backgroundRefreshToggled() {
        let harness = Harness()
        harness.advance(to: 10)
        harness.provider.reconfigure(.test(backgroundRefreshEnabled: false), lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        harness.advance(to: 1000)
        #expect(harness.service.callTimes == seconds(0))
        #expect(harness.provider.status().refresh.state == .disabled)
        harness.provider.reconfigure(.test(), lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        harness.scheduler.runUntilIdle()
        #expect(harness.service.callTimes == seconds(0, 1000), "the token is 1000 s old: refreshed at once")
    }
}
