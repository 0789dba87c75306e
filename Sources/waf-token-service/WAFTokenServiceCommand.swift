import ArgumentParser
import Dispatch
import WAFChallenge
import WAFLocalTokenService
import WAFVersion

#if canImport(Glibc)
import Glibc
#endif

/// `waf-token-service`: the local token service, until SIGTERM or SIGINT.
@main
struct WAFTokenServiceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "waf-token-service",
        abstract: "A local AWS WAF token service: challenges, verify, tokens, a protected resource, faults.",
        discussion: """
            Prints "listening on <application integration URL>" as its first line. Faults can also be \
            armed at run time: POST /__admin/faults {"kind": "fail", "target": "any", "count": 3, "status": 503}; \
            counters are at GET /__admin/counters.
            """,
        version: WAFTokendVersion.current)

    @Option(help: "Address to listen on.") var host = "127.0.0.1"
    @Option(help: "Port to listen on; 0 picks a free one.") var port = 0
    @Option(help: "Leading zero bits a solution needs (0…32).") var difficulty = 8
    @Option(help: "sha256, pbkdf2 or scrypt.") var challengeType = "sha256"
    @Option(help: "scrypt's N for scrypt challenges.") var memory = 128
    @Option(help: "How long a token is accepted after it was minted.") var immunitySeconds = 300
    @Option(help: "How long a challenge may take from issue to verify.") var challengeLifetimeSeconds = 300
    @Option(name: .customLong("token-domain"), help: "A domain tokens may be issued for (repeatable); localhost and 127.0.0.1 always are.")
    var tokenDomains: [String] = []
    @Option(help: "Answer /inputs with a redirect cached for this many seconds.") var redirectMaxAge: Int?
    @Option(help: "PEM certificate chain: serve https.") var tlsCert: String?
    @Option(help: "PEM private key for --tls-cert.") var tlsKey: String?
    @Option(help: "Delay every token-service answer.") var latencyMs = 0
    @Option(help: "Fail the next N token-service calls with --fail-status.") var failNext = 0
    @Option(help: "Status for --fail-next.") var failStatus = 503
    @Option(help: "Drop the connection of the next N calls.") var dropNext = 0
    @Option(help: "Answer the next N calls with malformed JSON.") var malformedNext = 0
    @Option(help: "Answer the next N verify calls as if the challenge had expired.") var expiredNext = 0
    @Option(help: "Never answer the next N calls.") var stallNext = 0
    @Option(help: "Which calls the faults above hit: inputs, verify or any.") var faultTarget = "any"
    @Flag(help: "The protected resource challenges a token used from another address than it was fetched from (TGT_TokenReuseIp).")
    var bindTokensToAddresses = false

    func validate() throws {
        guard ChallengeType(name: challengeType)?.isSolvable == true else {
            throw ValidationError("--challenge-type must be sha256, pbkdf2 or scrypt, not \(challengeType)")
        }
        guard FaultRule.Target(rawValue: faultTarget) != nil else {
            throw ValidationError("--fault-target must be inputs, verify or any, not \(faultTarget)")
        }
        if let problem = makeConfiguration().problems.first { throw ValidationError(problem) }
    }

    func makeConfiguration() -> LocalTokenServiceConfiguration {
        let target = FaultRule.Target(rawValue: faultTarget) ?? .any
        let armed: [(FaultRule.Kind, Int)] = [
            (.fail, failNext), (.drop, dropNext), (.malformed, malformedNext), (.expired, expiredNext), (.stall, stallNext),
        ]
        return LocalTokenServiceConfiguration(
            host: host, port: port, difficulty: difficulty, challengeType: ChallengeType(name: challengeType) ?? .sha256,
            memory: memory, immunitySeconds: immunitySeconds, challengeLifetimeSeconds: challengeLifetimeSeconds,
            tokenDomains: ["localhost", "127.0.0.1"] + tokenDomains.map { $0.lowercased() },
            redirectMaxAge: redirectMaxAge, tlsCertificateFile: tlsCert, tlsKeyFile: tlsKey,
            faults: armed.filter { $0.1 > 0 }.map {
                FaultRule(kind: $0.0, target: $0.0 == .expired ? .verify : target, count: $0.1, status: failStatus)
            },
            latencyMilliseconds: latencyMs, bindTokensToAddresses: bindTokensToAddresses)
    }

    func run() async throws {
        // Armed before the line is printed: whoever reads it may stop the service at once, and a
        // SIGTERM between an ignore and its source would be lost, leaving the service running.
        let termination = Termination()
        let service = try LocalTokenService(configuration: makeConfiguration())
        let url = try await service.start()
        print("listening on \(url)")
        // Scripts read that line through a pipe: do not leave it in the buffer.
        fflush(nil)
        await termination.wait()
        await service.stop()
    }
}

/// SIGTERM or SIGINT, taken from the moment it is made; `wait` returns once one came (at once if
/// one already has).
final class Termination: @unchecked Sendable {
    // @unchecked: `sources` is set once in init; the rest is touched on `queue` only.
    private let queue = DispatchQueue(label: "signals")
    private var sources: [any DispatchSourceSignal] = []
    private var fired = false
    private var waiter: CheckedContinuation<Void, Never>?

    init() {
        for signal in [SIGTERM, SIGINT] { Glibc.signal(signal, SIG_IGN) }
        sources = [SIGTERM, SIGINT].map { signal in
            let source = DispatchSource.makeSignalSource(signal: signal, queue: queue)
            source.setEventHandler { [self] in
                fired = true
                waiter?.resume()
                waiter = nil
            }
            source.resume()
            return source
        }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            queue.async { [self] in
                if fired { continuation.resume() } else { waiter = continuation }
            }
        }
    }
}
