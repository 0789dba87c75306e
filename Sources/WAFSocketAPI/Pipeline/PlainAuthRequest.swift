/// Recognises a plain `GET /v1/auth` (forward authentication: nginx's `auth_request`, Caddy's
/// `forward_auth`, Traefik's `ForwardAuth`) from its raw head, as `PlainTokenRequest` does the
/// token read: at most one selector, HTTP/1.1, nothing about framing or the connection. What its
/// answer depends on is kept as byte ranges of the head: the request's cookies, the original
/// URI and the forwarded host.
enum PlainAuthRequest {
    private static let path = Array("GET /v1/auth".utf8)
    private static let cookie = Array("cookie".utf8)
    private static let forwardedURI = Array("x-forwarded-uri".utf8)
    private static let originalURI = Array("x-original-uri".utf8)
    private static let forwardedHost = Array("x-forwarded-host".utf8)

    struct Decision {
        let selector: Range<Int>?
        /// Every `Cookie` header's value, in order.
        var cookies: [Range<Int>] = []
        /// The one `X-Forwarded-Uri` or `X-Original-URI` (a request with both goes to the codec).
        var forwardedURI: Range<Int>?
        var originalURI: Range<Int>?
        var forwardedHost: Range<Int>?

        var uri: Range<Int>? { forwardedURI ?? originalURI }
    }

    /// For a complete head: nil if the fast path must not answer it.
    static func decide(_ head: UnsafeRawBufferPointer) -> Decision? {
        guard let (selector, headers) = PlainTokenRequest.target(head, path: path) else { return nil }
        var decision = Decision(selector: selector)
        // A forwarding header given twice, or both URI headers, or a comma list: the codec's
        // path decides whether they agree (`ForwardedRequest`, TENANT-13).
        var ambiguous = false
        let clean = PlainTokenRequest.scanHeaders(head, from: headers) { name, value in
            let value = trimmed(head, value)
            if PlainTokenRequest.matches(head, name, cookie) {
                decision.cookies.append(value)
            } else if PlainTokenRequest.matches(head, name, forwardedURI) {
                ambiguous = ambiguous || decision.forwardedURI != nil || decision.originalURI != nil
                decision.forwardedURI = value
            } else if PlainTokenRequest.matches(head, name, originalURI) {
                ambiguous = ambiguous || decision.originalURI != nil || decision.forwardedURI != nil
                decision.originalURI = value
            } else if PlainTokenRequest.matches(head, name, forwardedHost) {
                ambiguous = ambiguous || decision.forwardedHost != nil || head[value].contains(UInt8(ascii: ","))
                decision.forwardedHost = value
            }
        }
        return clean && !ambiguous ? decision : nil
    }

    /// Without the blanks around a header's value, as the codec reads it.
    private static func trimmed(_ head: UnsafeRawBufferPointer, _ value: Range<Int>) -> Range<Int> {
        var (start, end) = (value.lowerBound, value.upperBound)
        while start < end, head[start] == 0x20 || head[start] == 0x09 { start += 1 }
        while end > start, head[end - 1] == 0x20 || head[end - 1] == 0x09 { end -= 1 }
        return start..<end
    }
}
