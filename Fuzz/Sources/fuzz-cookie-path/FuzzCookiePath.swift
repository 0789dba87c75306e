import FuzzSupport
import WAFTokenCore

// Cookie path matching (COOK-1) against a second, plain reading of RFC 6265 §5.1.4 over octets
// (paths are octets on the wire, not grapheme clusters): the two must agree on every pair.

private func reference(_ request: String, _ cookie: String) -> Bool {
    let path = Array(request.utf8.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
    let cookie = Array(cookie.utf8)
    guard path.first == UInt8(ascii: "/") else { return false }
    if path == cookie { return true }
    guard path.starts(with: cookie) else { return false }
    return cookie.last == UInt8(ascii: "/") || path.dropFirst(cookie.count).first == UInt8(ascii: "/")
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafeRawPointer, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let split = input.choose(64)
    let bytes = input.rest()
    // Paths as bytes would arrive: only valid UTF-8 is compared (both sides see the same text).
    guard let request = String(validating: bytes.prefix(split), as: UTF8.self),
        let cookie = String(validating: bytes.dropFirst(split), as: UTF8.self)
    else { return 0 }
    let ours = WAFCookie.pathMatches(requestPath: request, cookiePath: cookie)
    if ours != reference(request, cookie) { violated("\(request.debugDescription) vs cookie path \(cookie.debugDescription): \(ours)") }
    return 0
}
