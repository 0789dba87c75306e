import Synchronization
import Testing
import WAFTestTraits

@testable import WAFProviderRegistry

/// What the canary and the proxy leave on their boards for `/v1/status`, `/readyz` and the proxy.
@Suite("The canary's and the proxy's boards", .offPool)
struct BoardTests {
    static let url = "https://api.example.com/health"

    @Test("Without a canary the board shows nothing and holds no readiness, whatever is recorded on it")
    func noCanaryShowsNothing() {
        let board = CanaryBoard()
        board.record(result: "captcha", verdict: .rejected, token: "token-1")
        #expect(board.snapshot == nil)
        #expect(!board.holdsReadiness)
    }

    @Test("A configured canary is unknown until a probe answers, then shows the answer")
    func unknownUntilAProbeAnswers() {
        let board = CanaryBoard()
        board.configure(url: Self.url, affectsReadiness: true)
        let before = board.snapshot
        #expect(before?.state == .unknown && before?.url == Self.url)
        #expect(before?.lastResult == nil && before?.lastAcceptedAt == nil)
        board.record(result: "accepted", verdict: .accepted, token: "token-1")
        let after = board.snapshot
        #expect(after?.state == .accepted && after?.lastResult == "accepted" && after?.lastAcceptedAt != nil)
    }

    @Test("CANARY3: readiness is held only while the canary rejects the token and counts for readiness")
    func CANARY3_holdsReadinessOnlyWhenRejectedAndCounting() {
        let board = CanaryBoard()
        board.configure(url: Self.url, affectsReadiness: true)
        #expect(!board.holdsReadiness, "unknown is not rejected")
        board.record(result: "accepted", verdict: .accepted, token: "token-1")
        #expect(!board.holdsReadiness)
        board.record(result: "captcha", verdict: .rejected, token: "token-1")
        #expect(board.holdsReadiness)
        board.configure(url: Self.url, affectsReadiness: false)
        #expect(!board.holdsReadiness, "canary.affectsReadiness false: shown, not counted")
        #expect(board.snapshot?.state == .rejected, "the same url keeps what the canary found")
        board.configure(url: Self.url, affectsReadiness: true)
        #expect(board.holdsReadiness)
        board.configure(url: nil, affectsReadiness: true)
        #expect(!board.holdsReadiness && board.snapshot == nil, "no canary, nothing to hold")
    }

    @Test("CANARY5: the board knows the token the canary saw accepted last; only an accepted answer changes it")
    func CANARY5_wasAcceptedComparesWithTheLastAcceptedToken() {
        let board = CanaryBoard()
        board.configure(url: Self.url, affectsReadiness: true)
        #expect(!board.wasAccepted("token-1"), "nothing accepted yet")
        board.record(result: "accepted", verdict: .accepted, token: "token-1")
        #expect(board.wasAccepted("token-1") && !board.wasAccepted("token-2"))
        board.record(result: "challenged", verdict: .rejected, token: "token-2")
        #expect(board.wasAccepted("token-1") && !board.wasAccepted("token-2"), "a challenge vouches for nothing")
        board.record(result: "accepted", verdict: .accepted, token: "token-2")
        #expect(!board.wasAccepted("token-1") && board.wasAccepted("token-2"))
    }

    @Test("A canary moved to another url starts over: unknown, no last answer, no token vouched for")
    func anotherURLStartsOver() {
        let board = CanaryBoard()
        board.configure(url: Self.url, affectsReadiness: true)
        board.record(result: "accepted", verdict: .accepted, token: "token-1")
        board.record(result: "captcha", verdict: .rejected, token: "token-1")
        board.configure(url: "https://api.example.com/other", affectsReadiness: true)
        let moved = board.snapshot
        #expect(moved?.url == "https://api.example.com/other" && moved?.state == .unknown)
        #expect(moved?.lastResult == nil && moved?.lastAcceptedAt == nil)
        #expect(!board.wasAccepted("token-1"))
        #expect(!board.holdsReadiness)
    }

    @Test("The proxy's board shows nothing while the proxy is off, and its route and counts while it serves")
    func proxyBoardWhileServing() {
        let board = ProxyBoard()
        #expect(board.snapshot == nil)
        board.serving(listen: "/run/waf-tokend/proxy.sock", upstream: "https://api.example.com/", tokenIn: "cookie")
        _ = board.requests.add(3, ordering: .relaxed)
        _ = board.challenges.add(1, ordering: .relaxed)
        #expect(
            board.snapshot
                == ProxyBoard.Snapshot(
                    listen: "/run/waf-tokend/proxy.sock", upstream: "https://api.example.com/", tokenIn: "cookie", requests: 3, challenges: 1,
                    replays: 0, upstreamErrors: 0))
        board.off()
        #expect(board.snapshot == nil)
    }
}
