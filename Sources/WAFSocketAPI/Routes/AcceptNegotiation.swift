/// Content negotiation between two media types (`/v1/token` defaults to JSON, `/v1/cookie` to text).
enum AcceptNegotiation {
    static let json = "application/json"
    static let plainText = "text/plain"

    /// Whether `accept` asks for `text/plain` over `application/json`.
    static func prefersPlainText(_ accept: String?) -> Bool {
        prefers(plainText, over: json, in: accept)
    }

    /// Whether `accept` asks for `application/json` over `text/plain`.
    static func prefersJSON(_ accept: String?) -> Bool {
        prefers(json, over: plainText, in: accept)
    }

    /// `wanted` wins when its quality is higher, or equal and matched more specifically (an explicit
    /// type beats `type/*`, which beats `*/*`). Without an Accept header, neither wins.
    static func prefers(_ wanted: String, over other: String, in accept: String?) -> Bool {
        guard let accept else { return false }
        let a = match(wanted, in: accept)
        let b = match(other, in: accept)
        guard a.q > 0 else { return false }
        return a.q > b.q || (a.q == b.q && a.specificity > b.specificity)
    }

    private static func match(_ type: String, in accept: String) -> (q: Double, specificity: Int) {
        let family = String(type.prefix { $0 != "/" }) + "/*"
        var best: (q: Double, specificity: Int) = (0, -1)
        for range in accept.split(separator: ",") {
            let parts = range.split(separator: ";")
            let name = parts[0].filter { !$0.isWhitespace }.lowercased()
            let specificity = name == type ? 2 : name == family ? 1 : name == "*/*" ? 0 : -1
            guard specificity > best.specificity else { continue }
            var q = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.filter { !$0.isWhitespace } }
                if pair.count == 2, pair[0] == "q", let value = Double(pair[1]) { q = value }
            }
            best = (q, specificity)
        }
        return best
    }
}
