// Proof-of-work speed: nonces per second of the SHA-256 and PBKDF2 solvers on one core and on all
// cores, beside Python's hashlib (OpenSSL) measured in the same run on the same input.
//
//   swift run -c release waf-pow-bench [seconds per measurement, default 3]
import Foundation
import WAFChallenge

let seconds = CommandLine.arguments.dropFirst().first.flatMap(Double.init) ?? 3
let cores = ProofOfWorkSolver.availableCores
// The input of the protocol's test vector 2 and the mobile checksum: a realistic ~370-byte base.
let input = "eyJ2ZXJzaW9uIjoxLCJ1YmlkIjoiMGNkY2VlMzItY2E3Ni00ZTQ3LWJlNmYtNzRjMWFjMGNiMTY0IiwiYXR0ZW1wdF9pZCI6IjcyYTI4NDlhLTAxZjctNGZlMS1iMzMyLTIyODk3OGVmODVhYSIsImNyZWF0ZV90aW1lIjoiMjAyNC0wNS0zMFQwMDo1Nzo0OS4wODc4MDgzMTJaIiwiZGlmZmljdWx0eSI6NCwiY2hhbGxlbmdlX3R5cGUiOiJIYXNoY2FzaFNjcnlwdCJ9"
let checksum = VerifyRequest.mobileChecksum

let python = #"""
import hashlib, sys, time
from multiprocessing import Pool

BASE = sys.argv[1].encode()
SALT = sys.argv[2][:12].encode()
SECONDS = float(sys.argv[3])
CORES = int(sys.argv[4])

def sha256(_):
    prefix = hashlib.sha256(BASE)
    n, end = 0, time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        for _ in range(1000):
            h = prefix.copy(); h.update(format(n, "X").encode()); h.digest(); n += 1
    return n

def pbkdf2(_):
    n, end = 0, time.perf_counter() + SECONDS
    while time.perf_counter() < end:
        for _ in range(4):
            hashlib.pbkdf2_hmac("sha256", BASE + format(n, "X").encode(), SALT, 1000, 32); n += 1
    return n

if __name__ == "__main__":
    for name, fn in (("sha256", sha256), ("pbkdf2", pbkdf2)):
        print(name, fn(0) / SECONDS)
        with Pool(CORES) as pool:
            print(name + "-all", sum(pool.map(fn, range(CORES))) / SECONDS)
"""#

func runPython() -> [String: Double] {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", "-c", python, input + checksum, checksum, String(seconds), String(cores)]
    let output = Pipe()
    process.standardOutput = output
    do {
        try process.run()
    } catch {
        FileHandle.standardError.write(Data("cannot run python3: \(error)\n".utf8))
        return [:]
    }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    var figures: [String: Double] = [:]
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
        let parts = line.split(separator: " ")
        if parts.count == 2, let value = Double(parts[1]) { figures[String(parts[0])] = value }
    }
    return figures
}

func rate(_ type: ChallengeType, workers: Int) throws -> Double {
    let work = ProofOfWork(type: type, input: input, checksum: checksum, difficulty: 256, nonceFormat: .upperHexadecimal)
    let (nonces, elapsed) = try ProofOfWorkSolver(workers: workers).measure(work, for: .milliseconds(Int64(seconds * 1000)))
    return Double(nonces) / elapsed.seconds
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

func format(_ value: Double) -> String { String(format: "%10.0f", value) }
func ratio(_ a: Double, _ b: Double?) -> String { b.map { String(format: "%5.2f×", a / $0) } ?? "   n/a" }

print("proof-of-work nonces/s, \(cores) cores, \(seconds) s per figure, base of \((input + checksum).utf8.count) bytes")
let reference = runPython()
print("type     swift 1 core  python 1 core  ratio   swift \(cores) cores  python \(cores) cores  ratio  scaling")
for type in [ChallengeType.sha256, .pbkdf2] {
    let one = try rate(type, workers: 1)
    let all = try rate(type, workers: cores)
    let pythonOne = reference[type.name]
    let pythonAll = reference[type.name + "-all"]
    print(
        "\(type.name.padding(toLength: 8, withPad: " ", startingAt: 0)) \(format(one))    \(pythonOne.map(format) ?? "       n/a")   \(ratio(one, pythonOne))   \(format(all))      \(pythonAll.map(format) ?? "       n/a")     \(ratio(all, pythonAll)) \(ratio(all, one))"
    )
}
