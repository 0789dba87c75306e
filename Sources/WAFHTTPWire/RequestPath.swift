/// The path the upstream will act on, as the proxy decides COOK-1 for it (TENANT-8): dot-segments
/// removed (RFC 3986 §5.2.4) from the client's path before it is put below the upstream's base
/// path, so that `/api/../admin` neither reaches `/admin` with the cookie of `tokenCookiePath:
/// /api` nor climbs out of the base path. What would hide a segment from that reading but not
/// from a server's is refused (400): a dot-segment written with `%2e`, and an encoded `/` or `\`
/// (or a bare `\`), which some servers decode into a separator.
package enum RequestPath {
    /// Why a path is refused: it hides a segment.
    package struct Hidden: Error, Equatable {
        package let reason: String
    }

    /// The client's origin-form target (path and query) with its path normalised, or why not.
    package static func normalized(_ target: String) -> Result<String, Hidden> {
        // Nearly every path has no byte that could hide or remove a segment: one scan of its bytes
        // (the proxy does this per request) and the target goes on as it came.
        let bytes = target.utf8
        let pathEnd = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        if !bytes[..<pathEnd].contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "\\") }) {
            return .success(target)
        }
        let query = target.firstIndex(of: "?")
        let path = target[..<(query ?? target.endIndex)]
        if let problem = hidden(path) { return .failure(Hidden(reason: problem)) }
        let normalized = removeDotSegments(path)
        return .success(query.map { normalized + target[$0...] } ?? normalized)
    }

    /// RFC 3986 §5.2.4, on a path that starts with `/` (an origin-form target always does; a path
    /// that does not is returned as it came).
    package static func removeDotSegments(_ path: Substring) -> String {
        guard path.hasPrefix("/") else { return String(path) }
        var output: [Substring] = []
        let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".":
                if last { output.append("") }
            case "..":
                if !output.isEmpty { output.removeLast() }
                if last { output.append("") }
            default:
                output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }

    /// Why a path hides a segment, nil when it does not.
    private static func hidden(_ path: Substring) -> String? {
        if path.contains("\\") { return "a backslash in the path" }
        let lower = path.lowercased()
        if lower.contains("%2f") || lower.contains("%5c") { return "an encoded / or \\ in the path" }
        for segment in lower.split(separator: "/", omittingEmptySubsequences: false) where segment.contains("%2e") {
            let decoded = segment.replacing("%2e", with: ".")
            if decoded == "." || decoded == ".." { return "an encoded dot-segment (%2e) in the path" }
        }
        return nil
    }
}
