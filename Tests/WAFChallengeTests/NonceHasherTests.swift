import Crypto
import Testing
import WAFTestTraits
import _CryptoExtras

@testable import WAFChallenge

/// The solvers' hot loop counts nonce digits up in place and hashes from a copied midstate through
/// OpenSSL; these compare it with the plain way (the written nonce, swift-crypto's one-shot hashes).
@Suite("Nonce hasher", .offPool)
struct NonceHasherTests {
    @Test(
        "counting in place gives the written nonce, across every carry into a new digit",
        arguments: [NonceFormat.decimal, .upperHexadecimal])
    func countingInPlace(format: NonceFormat) throws {
        let work = ProofOfWork(type: .sha256, input: "x", checksum: "y", difficulty: 1, nonceFormat: format)
        var hasher = try NonceHasher(work)
        for start in [0, 9, 15, 250, 65_530, 99_990, 1 << 32 - 5, Int.max / 16 - 3] {
            hasher.seek(to: start)
            for nonce in start..<(start + 300) {
                #expect(hasher.nonceDigits == format.string(nonce), "nonce \(nonce)")
                hasher.advance()
            }
        }
    }

    @Test("the SHA-256 midstate gives swift-crypto's digest of the whole text, and its leading zero bits")
    func sha256Midstate() throws {
        let work = ProofOfWork(type: .sha256, input: Vectors.input2, checksum: "AA822286", difficulty: 1, nonceFormat: .upperHexadecimal)
        var hasher = try NonceHasher(work)
        hasher.seek(to: 0)
        for nonce in 0..<3000 {
            let text = work.input + work.checksum + NonceFormat.upperHexadecimal.string(nonce)
            let expected = Array(SHA256.hash(data: Array(text.utf8)))
            #expect(try hasher.leadingZeroBits() == ProofOfWork.leadingZeroBits(expected), "nonce \(nonce)")
            hasher.advance()
        }
        #expect(try work.digest(nonce: "1F") == Array(SHA256.hash(data: Array((work.input + work.checksum + "1F").utf8))))
    }

    @Test("PBKDF2 through OpenSSL gives swift-crypto's key")
    func pbkdf2() throws {
        let work = ProofOfWork(
            type: .pbkdf2, input: Vectors.input2, checksum: VerifyRequest.mobileChecksum, difficulty: 1, nonceFormat: .upperHexadecimal)
        for nonce in ["0", "8D", "FFF"] {
            let expected = try KDF.Insecure.PBKDF2.deriveKey(
                from: Array((work.input + work.checksum + nonce).utf8), salt: Array(work.checksum.utf8.prefix(12)), using: .sha256,
                outputByteCount: 32, unsafeUncheckedRounds: 1000
            ).withUnsafeBytes { Array($0) }
            #expect(try work.digest(nonce: nonce) == expected, "nonce \(nonce)")
        }
    }

    @Test("a client's nonce of any length is hashed whole")
    func longNonce() throws {
        let nonce = String(repeating: "7", count: 200)
        let work = ProofOfWork(type: .sha256, input: "x", checksum: "y", difficulty: 1, nonceFormat: .decimal)
        #expect(try work.digest(nonce: nonce) == Array(SHA256.hash(data: Array(("xy" + nonce).utf8))))
    }
}
