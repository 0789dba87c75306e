/// What `GET /v1/auth` reads of the request a proxy forwards: the original URI (whose path
/// decides COOK-1) and, where `auth.selectByForwardedHost` allows it, the host that chooses the
/// provider. A proxy passes the client's own headers along with its own, so a header the client
/// wrote must never widen what a request gets (TENANT-13): two URI headers that disagree, or a
/// forwarding header given twice with different values, are refused, and the host chooses
/// nothing unless the operator said so.
struct ForwardedRequest: Equatable {
    /// The original request's target; "/" when no proxy said.
    let uri: String
    /// The forwarded host without its port, nil unless it may choose the provider.
    let host: String?

    /// The headers whose values this reads; each must appear once, or every time the same.
    static let names = ["X-Forwarded-Uri", "X-Original-URI", "X-Forwarded-Host"]

    /// Why a request is refused (400): its sentence.
    struct Refusal: Error, Equatable {
        let message: String
    }

    /// From every value of each header, in order (`values("X-Forwarded-Uri")`), and whether
    /// `X-Forwarded-Host` may choose the provider.
    static func read(_ values: (String) -> [String], selectByHost: Bool) -> Result<ForwardedRequest, Refusal> {
        var single: [String: String] = [:]
        for name in names {
            // A host list in one header says as much as the header given twice; a URI may hold
            // commas of its own (`?tags=a,b`) and is compared whole.
            let given = values(name)
            let all =
                name == "X-Forwarded-Host"
                ? given.flatMap { $0.split(separator: ",", omittingEmptySubsequences: false) }.map(trimmed) : given.map { trimmed(Substring($0)) }
            guard let first = all.first else { continue }
            if all.contains(where: { $0 != first }) {
                return .failure(Refusal(message: "\(name) is given more than once with different values; no token for an ambiguous request"))
            }
            single[name] = first
        }
        let forwarded = single["X-Forwarded-Uri"], original = single["X-Original-URI"]
        if let forwarded, let original, forwarded != original {
            return .failure(Refusal(message: "X-Forwarded-Uri and X-Original-URI name different requests; no token for an ambiguous request"))
        }
        let host = selectByHost ? single["X-Forwarded-Host"].flatMap(Self.hostWithoutPort) : nil
        return .success(ForwardedRequest(uri: forwarded ?? original ?? "/", host: host))
    }

    /// A host as `X-Forwarded-Host` writes it, without its port (an IPv6 literal in brackets).
    static func hostWithoutPort(_ value: String) -> String? {
        var host = value
        if host.hasPrefix("[") { return host.split(separator: "]").first.map { String($0.dropFirst()) } }
        if let colon = host.lastIndex(of: ":"), host.firstIndex(of: ":") == colon { host = String(host[..<colon]) }
        return host.isEmpty ? nil : host
    }

    private static func trimmed(_ value: Substring) -> String {
        String(value.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
