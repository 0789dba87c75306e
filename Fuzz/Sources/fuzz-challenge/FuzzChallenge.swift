import FoundationEssentials
import FuzzSupport
import WAFChallenge

// The token service's answers: a challenge from /inputs, a verify answer. Properties: nothing
// traps; a challenge that parses round-trips through its document; a token that parses is fit for
// a cookie.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: data, count: size))
    if let challenge = try? Challenge(parsing: bytes) {
        guard let encoded = try? JSONEncoder().encode(challenge.document), let again = try? Challenge(parsing: Array(encoded)), again == challenge
        else { violated("a challenge that does not survive its own document") }
    }
    if case .token(let token)? = try? VerifyOutcome(parsing: bytes), !VerifyOutcome.isUsableToken(token) {
        violated("a verify token unfit for a cookie")
    }
    return 0
}
