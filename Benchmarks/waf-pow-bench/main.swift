// Proof-of-work speed of the solvers, printed as one number (nonces per second) so that
// Benchmarks/pow-bench.sh can set it beside the C anchor (Benchmarks/c-anchors/pow.c) run on the
// same base in the same run. sha256-swift-crypto measures the option the SHA-256 solver does not
// take: swift-crypto's SHA256 copied per nonce, on one core. (The PBKDF2 solver is swift-crypto's;
// the option it does not take, OpenSSL's, is the anchor itself.)
//
//   waf-pow-bench sha256|pbkdf2|sha256-swift-crypto THREADS SECONDS BASE CHECKSUM
import Crypto
import WAFChallenge
import _CryptoExtras

#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String) -> Never {
    FileDescriptorOutput.standardError.write(message + "\n")
    exit(64)
}

enum FileDescriptorOutput {
    case standardError
    func write(_ text: String) { _ = text.utf8CString.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count - 1) } }
}

let arguments = CommandLine.arguments
guard arguments.count == 6, let threads = Int(arguments[2]), let seconds = Double(arguments[3]) else {
    fail("usage: waf-pow-bench sha256|pbkdf2|sha256-swift-crypto THREADS SECONDS BASE CHECKSUM")
}
let (variant, base, checksum) = (arguments[1], arguments[4], arguments[5])
let duration = Duration.milliseconds(Int64(seconds * 1000))
let clock = ContinuousClock()

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// The way the solvers hashed before the OpenSSL midstate: one thread, the same nonces.
func swiftCrypto(_ body: (String) -> [UInt8]) -> Double {
    var nonce = 0
    var sink = 0
    let started = clock.now
    while clock.now - started < duration {
        for _ in 0..<64 {
            sink &+= ProofOfWork.leadingZeroBits(body(NonceFormat.upperHexadecimal.string(nonce)))
            nonce += 1
        }
    }
    precondition(sink >= 0)
    return Double(nonce) / (clock.now - started).seconds
}

let rate: Double
switch variant {
case "sha256", "pbkdf2":
    let type: ChallengeType = variant == "sha256" ? .sha256 : .pbkdf2
    // Difficulty 256 is never met: every worker hashes for the whole duration.
    let work = ProofOfWork(type: type, input: base, checksum: checksum, difficulty: 256, nonceFormat: .upperHexadecimal)
    let (nonces, elapsed) = try ProofOfWorkSolver(workers: threads).measure(work, for: duration)
    rate = Double(nonces) / elapsed.seconds
case "sha256-swift-crypto":
    var prefix = SHA256()
    prefix.update(data: Array((base + checksum).utf8))
    rate = swiftCrypto { nonce in
        var hash = prefix
        hash.update(data: Array(nonce.utf8))
        return Array(hash.finalize())
    }
default:
    fail("unknown variant \(variant)")
}
print(Int(rate))
