import Foundation
import NIOConcurrencyHelpers
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

@Suite("Token and provider objects", .offPool, .timeLimit(.minutes(1)))
struct ObjectTests {
    @Test("OBJ-1: a token holds its value and when it was fetched, and never shows the value")
    func OBJ1_tokenValueAndFetchTimes() throws {
        let harness = Harness(latency: .seconds(2))
        harness.advance(to: 2)
        let token = try #require(harness.provider.getToken())
        #expect(token.getValue() == "token-1")
        #expect(token.value == token.getValue())
        #expect(token.fetchedAtMonotonic.sinceOrigin == .seconds(2))
        #expect(token.fetchedAt == harness.scheduler.wallClockOrigin.addingTimeInterval(2))
        #expect(token.age(at: MonotonicInstant(sinceOrigin: .seconds(7))) == .seconds(5))
        // SHA-256("token-1") begins 3f08aace…: the fingerprint is its first 8 hex digits.
        #expect(token.fingerprint == "3f08aace")
        #expect(WAFToken.fingerprint(of: "abc") == "ba7816bf")
        #expect(!"\(token)".contains("token-1"))
        #expect("\(token)" == "WAFToken(3f08aace)")
    }

    @Test("OBJ-3: the provider offers getToken, onTokenReady, loadTokenIntoProvider and storeTokenInCookieStorage")
    func OBJ3_providerOperations() throws {
        let harness = Harness(.test(), script: failures(1), then: .fail(ScriptedTokenFetcher.outage))
        harness.provider.loadTokenIntoProvider("seeded-elsewhere")
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.getToken()?.value == "seeded-elsewhere")

        let recorder = CallbackRecorder()
        harness.provider.onTokenReady(recorder.callback)
        harness.scheduler.runUntilIdle()
        #expect(recorder.tokens == ["seeded-elsewhere"])

        let elsewhere = WAFToken(value: "stored-by-hand", fetchedAt: Date(), fetchedAtMonotonic: .origin)
        harness.provider.storeTokenInCookieStorage(elsewhere)
        #expect(harness.provider.cookieManager.cookieHeaderValue(forPath: "/") == "aws-waf-token=stored-by-hand")
    }

    @Test("OBJ-4: a result callback gets exactly one of token and error")
    func OBJ4_exactlyOneOfTokenAndError() {
        let good = Harness()
        let goodRecorder = CallbackRecorder()
        good.provider.onTokenReady(goodRecorder.callback)
        good.scheduler.runUntilIdle()
        let bad = Harness(.test(maxRetryCount: 0), then: .fail(ScriptedTokenFetcher.outage))
        let badRecorder = CallbackRecorder()
        bad.provider.onTokenReady(badRecorder.callback)
        bad.scheduler.runUntilIdle()
        bad.provider.shutdown()
        let shutRecorder = CallbackRecorder()
        bad.provider.onTokenReady(shutRecorder.callback)
        bad.scheduler.runUntilIdle()

        for entry in goodRecorder.all + badRecorder.all + shutRecorder.all {
            #expect((entry.token == nil) != (entry.error == nil))
        }
        #expect(goodRecorder.count == 1 && badRecorder.count == 1 && shutRecorder.count == 1)
    }

    @Test("OBJ-5: the SDK's error cases, each with a name and one line of description")
    func OBJ5_sdkErrorCases() {
        struct Boom: Error {}
        let cases: [(SdkError, String)] = [
            (.errorInvokingGetChallengeEndpoint("HTTP 500"), "errorInvokingGetChallengeEndpoint"),
            (.invalidChallenge("no input"), "invalidChallenge"),
            (.errorRunningChallenge("cancelled"), "errorRunningChallenge"),
            (.invalidVerifyChallengeRequest("encoding"), "invalidVerifyChallengeRequest"),
            (.invalidVerifyChallengeResponse("no token"), "invalidVerifyChallengeResponse"),
            (.errorInvokingVerifyEndpoint("HTTP 502"), "errorInvokingVerifyEndpoint"),
            (.networkUnavailable("connection refused"), "networkUnavailable"),
            (.unexpected(Boom()), "unexpected"),
            (.allRetriesFailed(.networkUnavailable("down")), "allRetriesFailed"),
        ]
        for (error, name) in cases {
            #expect(error.name == name)
            #expect(!error.description.isEmpty && !error.description.contains("\n"))
        }
        let wrapped = SdkError.allRetriesFailed(.invalidChallenge("bad type"))
        #expect(wrapped.underlying.name == "invalidChallenge")
        #expect(wrapped.description == "all retries failed; last error: the token service sent a challenge that cannot be used: bad type")
    }
}
