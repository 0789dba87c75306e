import FuzzSupport
import WAFTokenCore

// Cookie path matching (COOK-1) against a second, plain reading of RFC 6265 §5.1.4 written over
// Strings: the two must agree on every pair of paths.

private func reference(_ request: String, _ cookie: String) -> Bool {
    let path = String(request.prefix { $0 != "?" && $0 != "#" })
    guard path.hasPrefix("/") else { return false }
    if path == cookie { return true }
    guard path.hasPrefix(cookie) else { return false }
    return cookie.hasSuffix("/") || path.dropFirst(cookie.count).hasPrefix("/")
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
