import AsyncHTTPClient
import Foundation
import NIOCore
import Testing
import WAFChallenge
import WAFLocalTokenService
import WAFTestSupport
import WAFTestTraits
import WAFTokenCore
import WAFTokenServiceHTTP

/// A provider with the real HTTP client, against a real `waf-token-service` process.
struct Fixture {
    let service: ServiceProcess
    let client: HTTPTokenFetcher
    let provider: WAFTokenProvider
    let configuration: WAFConfiguration

    /// For tests whose subject is not a timeout: a refusal, a reset or a bad answer comes at once,
    /// and a machine busy with the rest of the suite (a 2 s bound once ran out while connecting to
    /// a closed port) must not turn it into "no answer in time".
    static let generousTimeout = Duration.seconds(20)
    /// For tests whose subject is a timeout (a stall, a trickle), which each cost a whole timeout:
    /// short, but three times what a loaded machine once needed for a plain answer.
    static let shortTimeout = Duration.seconds(3)

    init(
        service arguments: [String] = [], domain: String = "127.0.0.1", backgroundRefresh: Bool = true,
        maxRetryCount: Int? = nil, maxErrorDelayMsec: Int = 50, timeout: Duration = Fixture.generousTimeout
    ) throws {
        service = try ServiceProcess(arguments)
        client = try HTTPTokenFetcher(settings: .init(timeout: timeout))
        configuration = try WAFConfiguration(
            applicationIntegrationUrl: service.url, domainName: domain, backgroundRefreshEnabled: backgroundRefresh,
            maxErrorTokenRefreshDelayMsec: maxErrorDelayMsec, maxRetryCount: maxRetryCount)
        provider = WAFTokenProvider(configuration: configuration, fetcher: client, options: .init(jitter: false))
    }

    func stop() async {
        provider.shutdown()
        try? await client.shutdown()
        await service.stop()
    }

    /// One fetch by the client alone, outside any provider.
    func fetchOnce(existingToken: String? = nil) async throws(SdkError) -> String {
        try await client.fetchToken(WAFTokenFetchRequest(configuration: configuration, existingToken: existingToken))
    }
}

/// Expects `body` to throw the SdkError case `name`, with `text` in its description.
func expectSdkError<T>(
    _ name: String, saying text: String? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> T
) async {
    let error = await #expect(throws: SdkError.self, sourceLocation: sourceLocation) { _ = try await body() }
    #expect(error?.name == name, "\(String(describing: error))", sourceLocation: sourceLocation)
    if let text { #expect(error?.description.contains(text) == true, "\(String(describing: error))", sourceLocation: sourceLocation) }
}

@Suite("End to end: provider, HTTP client and the local token service", .offPool, .timeLimit(.minutes(2)))
struct EndToEndTests {
    @Test("a token from the local service is accepted by its protected resource, by cookie or header")
    func tokenAcceptedByProtectedResource() async throws {
        let fixture = try Fixture()
        let token = try await fixture.provider.tokenReady()
        #expect(try await fixture.service.calls() == ["inputs 200 challenge", "verify 200 token"])
        #expect(try await fixture.service.protected(cookie: token.value) == (200, nil))
        #expect(try await fixture.service.protected(header: token.value) == (200, nil))
        #expect(try await fixture.service.protected(cookie: nil) == (202, "challenge"))
        #expect(try await fixture.service.protected(cookie: token.value + "x") == (202, "challenge"))
        await fixture.stop()
    }

    @Test(
        "RET-1 over the wire: failures at start are retried until a token comes",
        arguments: [
            (["--fail-next", "3", "--fault-target", "inputs"], ["inputs 503 fault: fail", "inputs 503 fault: fail", "inputs 503 fault: fail"]),
            (["--drop-next", "2"], ["inputs - fault: drop", "inputs - fault: drop"]),
            (["--malformed-next", "1", "--fault-target", "inputs"], ["inputs 200 fault: malformed"]),
            (
                ["--fail-next", "2", "--fail-status", "403", "--fault-target", "verify"],
                [
                    "inputs 200 challenge", "verify 403 fault: fail", "inputs 200 challenge", "verify 403 fault: fail",
                ]
            ),
        ])
    func RET1_faultsAreRetried(arguments: [String], failedCalls: [String]) async throws {
        let fixture = try Fixture(service: arguments)
        _ = try await fixture.provider.tokenReady()
        #expect(try await fixture.service.calls() == failedCalls + ["inputs 200 challenge", "verify 200 token"])
        await fixture.stop()
    }

    @Test("an expired challenge is solved again within the same attempt")
    func expiredChallengeSolvedAgain() async throws {
        let fixture = try Fixture(service: ["--expired-next", "1"])
        _ = try await fixture.provider.tokenReady()
        #expect(try await fixture.service.calls() == ["inputs 200 challenge", "verify 200 fault: expired", "verify 200 token"])
        let counters = fixture.provider.status().counters
        #expect(counters.fetchAttempts == 1 && counters.fetchFailures == 0, "one attempt, without failure")
        await fixture.stop()
    }

    @Test("a service that stops answering times out and the attempt is retried")
    func stallTimesOut() async throws {
        let fixture = try Fixture(service: ["--stall-next", "1", "--fault-target", "inputs"], timeout: Fixture.shortTimeout)
        _ = try await fixture.provider.tokenReady()
        let calls = try await fixture.service.calls()
        #expect(calls == ["inputs - fault: stall", "inputs 200 challenge", "verify 200 token"])
        #expect(fixture.provider.status().refresh.lastError == nil)
        await fixture.stop()
    }

    @Test("added latency slows answers down but changes nothing else")
    func latency() async throws {
        let fixture = try Fixture(service: ["--latency-ms", "300"])
        _ = try await fixture.provider.tokenReady()
        #expect(try await fixture.service.calls() == ["inputs 200 challenge", "verify 200 token"])
        await fixture.stop()
    }

    @Test("RET-3 over the wire: after maxRetryCount retries the waiter is told, then an explicit request fetches at once")
    func RET3_waiterToldAfterItsRetries() async throws {
        // A long error-phase wait keeps the provider quiet after the answer, so the count is exact.
        let fixture = try Fixture(service: ["--fail-next", "1000"], maxRetryCount: 2, maxErrorDelayMsec: 30000)
        await expectSdkError("allRetriesFailed", saying: "HTTP 503") { try await fixture.provider.tokenReady() }
        #expect(try await fixture.service.calls() == Array(repeating: "inputs 503 fault: fail", count: 3))
        try await fixture.service.reset()
        _ = try await fixture.provider.tokenReady()
        #expect(try await fixture.service.calls().suffix(2) == ["inputs 200 challenge", "verify 200 token"])
        await fixture.stop()
    }

    @Test("TOK-5 over the wire: the last good token survives every fault")
    func TOK5_lastGoodTokenSurvivesEveryFault() async throws {
        // A long error-phase wait keeps the provider from fetching on its own between one fault's
        // reset and the next one's arming: only the explicit refreshes below ask the service.
        let fixture = try Fixture(maxRetryCount: 1, maxErrorDelayMsec: 30000, timeout: Fixture.shortTimeout)
        let good = try await fixture.provider.tokenReady()
        let faults: [FaultRule] = [
            FaultRule(kind: .fail, count: 100, status: 500),
            FaultRule(kind: .drop, count: 100),
            FaultRule(kind: .malformed, count: 100),
            FaultRule(kind: .expired, target: .verify, count: 100),
            FaultRule(kind: .stall, count: 100),
            FaultRule(kind: .body, target: .verify, count: 100, body: #"{"token": 42}"#),
            FaultRule(kind: .trickle, count: 100, intervalMilliseconds: 200),
        ]
        for fault in faults {
            try await fixture.service.reset()
            try await fixture.service.arm(fault)
            await expectSdkError("allRetriesFailed") { try await fixture.provider.refreshToken() }
            #expect(fixture.provider.getToken() == good, "after \(fault.kind)")
            #expect(fixture.provider.cookieManager.currentCookie?.value == good.value)
        }
        try await fixture.service.reset()
        let renewed = try await fixture.provider.refreshToken()
        #expect(renewed.value != good.value)
        #expect(fixture.provider.getToken() == renewed)
        await fixture.stop()
    }

    @Test(
        "RET-1 over the wire: a service that trickles its answer a byte at a time fails the attempt within tokenService.timeoutSec, head and body together"
    )
    func RET1_tricklingServiceEndsTheAttempt() async throws {
        // No background refresh: nothing but this test's fetches meets the fault.
        let fixture = try Fixture(backgroundRefresh: false, timeout: Fixture.shortTimeout)
        // 1,000 bytes, one every 200 ms: never silent for a whole timeout, done only after 200 s.
        try await fixture.service.arm(FaultRule(kind: .trickle, target: .inputs, count: 1, intervalMilliseconds: 200))
        let clock = ContinuousClock()
        let started = clock.now
        await expectSdkError("errorInvokingGetChallengeEndpoint", saying: "within 3.0 s") { try await fixture.fetchOnce() }
        let attempt = clock.now - started
        // The timeout, and a generous margin for a loaded machine; far below the 200 s of trickling.
        #expect(attempt >= Fixture.shortTimeout && attempt < .seconds(20), "\(attempt)")
        // The next attempt is a plain one.
        _ = try await fixture.fetchOnce()
        await fixture.stop()
    }

    @Test("a redirect of /inputs with Cache-Control max-age is followed, then remembered")
    func redirectRemembered() async throws {
        let fixture = try Fixture(service: ["--redirect-max-age", "60"])
        _ = try await fixture.provider.tokenReady()
        _ = try await fixture.provider.refreshToken()
        #expect(
            try await fixture.service.calls() == [
                "inputs 307 redirect", "inputs 200 challenge", "verify 200 token", "inputs 200 challenge", "verify 200 token",
            ])
        #expect(try await fixture.service.counters().redirects == 1)
        await fixture.stop()
    }

    @Test("every challenge type the service serves is solved", arguments: ["sha256", "pbkdf2", "scrypt"])
    func challengeTypes(type: String) async throws {
        let fixture = try Fixture(service: ["--challenge-type", type, "--difficulty", "6"])
        let token = try await fixture.provider.tokenReady()
        #expect(try await fixture.service.protected(cookie: token.value) == (200, nil))
        await fixture.stop()
    }

    @Test("the service rejects a domain that is not on its token domain list")
    func foreignDomainRejected() async throws {
        let fixture = try Fixture(domain: "example.org", backgroundRefresh: false)
        await expectSdkError("errorInvokingVerifyEndpoint", saying: "HTTP 403") { try await fixture.fetchOnce() }
        #expect(try await fixture.service.counters().verifyRejected == 1)
        await fixture.stop()
    }

    @Test("verify rejects a wrong solution, a foreign hmac and a challenge used twice")
    func verifyRejections() async throws {
        let service = try ServiceProcess(["--difficulty", "4"])
        let inputs = try await service.http.execute(HTTPClientRequest(url: service.url + "inputs?client=ios"), timeout: .seconds(5))
        let challenge = try Challenge(parsing: try await inputs.body.collect(upTo: 65536).readableBytesView)
        let work = challenge.proofOfWork(checksum: VerifyRequest.mobileChecksum, nonceFormat: .upperHexadecimal)
        let solution = try await ProofOfWorkSolver().solve(work).nonce
        let wrong = (0..<1000).map(NonceFormat.upperHexadecimal.string).first { !work.isSolved(by: $0) }!

        func verify(_ challenge: Challenge, _ solution: String) async throws -> (UInt, String) {
            var request = HTTPClientRequest(url: service.url + "verify")
            request.method = .POST
            request.body = .bytes(
                ByteBuffer(
                    bytes: try VerifyRequest(
                        challenge: challenge, solution: solution, client: "ios", checksum: VerifyRequest.mobileChecksum,
                        domain: "127.0.0.1", existingToken: nil
                    ).encoded()))
            let response = try await service.http.execute(request, timeout: .seconds(5))
            let body = try await response.body.collect(upTo: 65536)
            return (response.status.code, String(buffer: body))
        }
        let forged = Challenge(
            input: challenge.input, hmac: Base64.encode([UInt8](repeating: 1, count: 32)), region: nil, type: challenge.type,
            difficulty: challenge.difficulty)
        #expect(try await verify(challenge, wrong) == (403, #"{"error":"wrong solution"}"#))
        #expect(try await verify(forged, solution) == (403, #"{"error":"the challenge's hmac does not match"}"#))
        #expect(try await verify(challenge, solution).0 == 200)
        #expect(try await verify(challenge, solution) == (403, #"{"error":"the challenge was already used"}"#))
        #expect(try await service.counters().verifyRejected == 3)
        await service.stop()
    }

    @Test("an unreachable service is networkUnavailable")
    func unreachable() async throws {
        let client = try HTTPTokenFetcher(settings: .init(timeout: Fixture.generousTimeout))
        let configuration = try WAFConfiguration(applicationIntegrationUrl: "http://127.0.0.1:1/aaaaaaaaaaaa/bbbbbbbbbbbb/", domainName: "127.0.0.1")
        await expectSdkError("networkUnavailable") {
            try await client.fetchToken(WAFTokenFetchRequest(configuration: configuration, existingToken: nil))
        }
        try await client.shutdown()
    }

    @Test(
        "bad answers from the service are clear errors",
        arguments: [
            (FaultRule(kind: .body, target: .inputs, body: "{\"challenge\": "), "invalidChallenge", "the body is not JSON"),
            (
                FaultRule(kind: .body, target: .inputs, body: challengeBody(["challenge": #"{"input":"!!","hmac":"AAAA"}"#])), "invalidChallenge",
                "challenge.input is not base64"
            ),
            (FaultRule(kind: .body, target: .inputs, body: challengeBody(["difficulty": "40"])), "invalidChallenge", "difficulty 40 is outside 0…32"),
            (FaultRule(kind: .body, target: .inputs, body: challengeBody(["difficulty": "-3"])), "invalidChallenge", "difficulty -3 is outside 0…32"),
            (
                FaultRule(kind: .body, target: .inputs, body: challengeBody(["challenge_type": "\"hnope\""])), "invalidChallenge",
                "challenge_type hnope is not a type"
            ),
            (FaultRule(kind: .oversized, target: .inputs), "invalidChallenge", "larger than 65536 bytes"),
            (FaultRule(kind: .oversized, target: .verify), "invalidVerifyChallengeResponse", "larger than 65536 bytes"),
            (
                FaultRule(kind: .body, target: .verify, body: #"{"token": ["a"]}"#), "invalidVerifyChallengeResponse",
                "token is an array, not a string"
            ),
            (FaultRule(kind: .body, target: .verify, body: #"{"status": "ok"}"#), "invalidVerifyChallengeResponse", "neither token nor inputs"),
            (FaultRule(kind: .fail, target: .inputs, status: 500), "errorInvokingGetChallengeEndpoint", "HTTP 500"),
        ])
    func badAnswers(fault: FaultRule, error: String, text: String) async throws {
        let fixture = try Fixture(backgroundRefresh: false)
        try await fixture.service.arm(fault)
        await expectSdkError(error, saying: text) { try await fixture.fetchOnce() }
        await fixture.stop()
    }

    @Test("https to a service whose CA is given in a file; refused without it")
    func httpsWithCAFile() async throws {
        let certificates = try TestCertificates()
        let service = try ServiceProcess(["--tls-cert", certificates.serverCertificate, "--tls-key", certificates.serverKey])
        #expect(service.url.hasPrefix("https://127.0.0.1:"))
        let configuration = try WAFConfiguration(applicationIntegrationUrl: service.url, domainName: "127.0.0.1")
        let request = WAFTokenFetchRequest(configuration: configuration, existingToken: nil)

        let trusting = try HTTPTokenFetcher(settings: .init(caFile: certificates.authority))
        let token = try await trusting.fetchToken(request)
        #expect(VerifyOutcome.isUsableToken(token))

        let systemTrustOnly = try HTTPTokenFetcher(settings: .init(timeout: Fixture.generousTimeout))
        await expectSdkError("errorInvokingGetChallengeEndpoint") { try await systemTrustOnly.fetchToken(request) }
        #expect(throws: (any Error).self) { try HTTPTokenFetcher(settings: .init(caFile: "/nonexistent/ca.pem")) }

        try await trusting.shutdown()
        try await systemTrustOnly.shutdown()
        await service.stop()
    }

    @Test("a solve in progress is cancelled with the fetch, and by the app going to the background")
    func solvingIsCancelled() async throws {
        // PBKDF2 at difficulty 30 would take days on this machine.
        let fixture = try Fixture(service: ["--challenge-type", "pbkdf2", "--difficulty", "30"], backgroundRefresh: true)
        #expect(await eventually { (try? await fixture.service.counters().inputs) == 1 })
        #expect(fixture.provider.status().refresh.inFlight)
        fixture.provider.setLifecycle(.background)
        #expect(await eventually { !fixture.provider.status().refresh.inFlight })
        #expect(fixture.provider.status().refresh.held)
        #expect(fixture.provider.status().refresh.consecutiveFailures == 0)

        let fetch = Task { try await fixture.fetchOnce() }
        #expect(await eventually { (try? await fixture.service.counters().inputs) == 2 })
        fetch.cancel()
        await #expect(throws: SdkError.self) { try await fetch.value }
        #expect(try await fixture.service.counters().verify == 0)
        await fixture.stop()
    }
}
