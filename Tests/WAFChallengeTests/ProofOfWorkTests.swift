import Foundation
import Testing
import WAFChallenge
import WAFTestTraits

/// The protocol's test vectors (docs/protocol.md §2).
enum Vectors {
    static let input1 =
        "eyJ2ZXJzaW9uIjoxLCJ1YmlkIjoiNWRiNDMxMGItMWI0Yi00NzhiLWI2ODEtYzIxYTFkM2E0Mjg2IiwiYXR0ZW1wdF9pZCI6ImI0MWQxMDZmLWU0MGYtNDg0Mi1iZDdlLTFmMTUwYjBlNjZkMCIsImNyZWF0ZV90aW1lIjoiMjAyNC0wNS0yOVQyMjoyMzozNy4wNjQ3MDQ5OTJaIiwiZGlmZmljdWx0eSI6NCwiY2hhbGxlbmdlX3R5cGUiOiJIYXNoY2FzaFNjcnlwdCJ9AA8222865"
    static let input2 =
        "eyJ2ZXJzaW9uIjoxLCJ1YmlkIjoiMGNkY2VlMzItY2E3Ni00ZTQ3LWJlNmYtNzRjMWFjMGNiMTY0IiwiYXR0ZW1wdF9pZCI6IjcyYTI4NDlhLTAxZjctNGZlMS1iMzMyLTIyODk3OGVmODVhYSIsImNyZWF0ZV90aW1lIjoiMjAyNC0wNS0zMFQwMDo1Nzo0OS4wODc4MDgzMTJaIiwiZGlmZmljdWx0eSI6NCwiY2hhbGxlbmdlX3R5cGUiOiJIYXNoY2FzaFNjcnlwdCJ9"

    static let sha256 = ProofOfWork(type: .sha256, input: input1, checksum: "AA822286", difficulty: 8, nonceFormat: .decimal)
    static let scrypt = ProofOfWork(type: .scrypt, input: input2, checksum: "3763231C", difficulty: 8, memory: 128, nonceFormat: .decimal)
    static let pbkdf2 = ProofOfWork(
        type: .pbkdf2, input: input2, checksum: VerifyRequest.mobileChecksum, difficulty: 8, nonceFormat: .upperHexadecimal)
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

@Suite("Proof of work", .offPool)
struct ProofOfWorkTests {
    @Test("vector 1: SHA-256 with decimal nonces solves at 133, digest 0071b831…", arguments: [1, 2, 4])
    func vector1SHA256(workers: Int) async throws {
        let solution = try await ProofOfWorkSolver(workers: workers).solve(Vectors.sha256)
        #expect(solution.nonce == "133")
        #expect(hex(try Vectors.sha256.digest(nonce: "133")).hasPrefix("0071b831"))
    }

    @Test("vector 2: scrypt (N 128, r 8, p 1) with decimal nonces solves at 371", arguments: [1, 2])
    func vector2Scrypt(workers: Int) async throws {
        let solution = try await ProofOfWorkSolver(workers: workers).solve(Vectors.scrypt)
        #expect(solution.nonce == "371")
        #expect(Vectors.scrypt.isSolved(by: "371"))
        #expect(!Vectors.scrypt.isSolved(by: "370"))
    }

    @Test("vector 3: PBKDF2 with upper-case hex nonces solves at 141, key 00393123…", arguments: [1, 2])
    func vector3PBKDF2(workers: Int) async throws {
        let solution = try await ProofOfWorkSolver(workers: workers).solve(Vectors.pbkdf2)
        #expect(solution.nonce == "141")
        #expect(hex(try Vectors.pbkdf2.digest(nonce: "141")).hasPrefix("00393123"))
    }

    @Test("nonces: upper-case hex without padding for mobile SHA-256 and PBKDF2, decimal for browsers and scrypt")
    func nonceFormats() {
        #expect([0, 9, 10, 15, 255, 256, 4096].map(NonceFormat.upperHexadecimal.string) == ["0", "9", "A", "F", "FF", "100", "1000"])
        #expect([0, 9, 10, 133].map(NonceFormat.decimal.string) == ["0", "9", "10", "133"])
        #expect(ChallengeType.sha256.nonceFormat(client: "ios") == .upperHexadecimal)
        #expect(ChallengeType.pbkdf2.nonceFormat(client: "android") == .upperHexadecimal)
        #expect(ChallengeType.sha256.nonceFormat(client: "browser") == .decimal)
        #expect(ChallengeType.scrypt.nonceFormat(client: "ios") == .decimal)
        #expect(ProofOfWork.leadingZeroBits([0x00, 0x71]) == 9)
        #expect(ProofOfWork.leadingZeroBits([0x00, 0x00, 0x80]) == 16)
        #expect(ProofOfWork.leadingZeroBits([0xFF]) == 0)
    }

    @Test("cancelling the task stops a solve that would take hours")
    func cancellation() async {
        let hard = ProofOfWork(type: .pbkdf2, input: Vectors.input2, checksum: "x", difficulty: 32, nonceFormat: .upperHexadecimal)
        let task = Task { try await ProofOfWorkSolver(workers: 2).solve(hard) }
        try? await Task.sleep(for: .milliseconds(50))
        task.cancel()
        let result = await task.result
        #expect(throws: ProofOfWorkError.cancelled) { try result.get() }
    }

    @Test("a solve gives up at its time limit, not before it")
    func timeLimit() async {
        let hard = ProofOfWork(type: .sha256, input: "x", checksum: "y", difficulty: 32, nonceFormat: .decimal)
        let clock = ContinuousClock()
        let started = clock.now
        await #expect {
            try await ProofOfWorkSolver(workers: 2, timeLimit: .milliseconds(300)).solve(hard)
        } throws: { error in
            // How many nonces were tried depends on the CPU the workers got: on a loaded machine, none.
            if case ProofOfWorkError.timedOut = error { return true }
            return false
        }
        let elapsed = clock.now - started
        // Not before the limit; after it by a generous margin only (a loaded machine, 2 cores).
        #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(30), "\(elapsed)")
    }

    @Test("the network-bandwidth type and scrypt memory that is not a power of two are refused")
    func unsolvable() async {
        let bandwidth = ProofOfWork(type: .networkBandwidth, input: "x", checksum: "y", difficulty: 1, nonceFormat: .decimal)
        await #expect(throws: ProofOfWorkError.unsolvable("the network-bandwidth challenge is for browsers only")) {
            try await ProofOfWorkSolver().solve(bandwidth)
        }
        let oddMemory = ProofOfWork(type: .scrypt, input: "x", checksum: "y", difficulty: 1, memory: 100, nonceFormat: .decimal)
        #expect(oddMemory.unsolvableReason == "scrypt memory 100 is not a power of two in 2...65536")
    }
}
