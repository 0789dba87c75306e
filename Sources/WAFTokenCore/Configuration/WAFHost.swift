#if canImport(Glibc)
import Glibc
#endif

/// What a host name says about itself: an IP literal, a loopback host.
public enum WAFHost {
    /// `localhost`, 127.0.0.0/8 and ::1 (bare or in brackets): the only hosts that may be spoken
    /// to in plain http, and the only addresses a listener of ours may bind.
    public static func isLoopback(_ host: String) -> Bool {
        let bare = (host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host).lowercased()
        if bare == "localhost" { return true }
        if let octets = ipv4Octets(bare) { return octets[0] == 127 }
        return ipv6Literal(bare) == "::1"
    }

    /// Whether `host` is an IP address, which a cookie can only name on its own (host-only).
    public static func isIPLiteral(_ host: String) -> Bool {
        ipv4Octets(host) != nil || ipv6Literal(host) != nil
    }

    /// The four octets of a dotted-quad IPv4 address, or nil.
    public static func ipv4Octets(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let octets = parts.compactMap { part -> UInt8? in
            guard (1...3).contains(part.count), part.allSatisfy(\.isASCII), part.allSatisfy(\.isNumber)
            else { return nil }
            return UInt8(part)
        }
        return octets.count == 4 ? octets : nil
    }

    /// An IPv6 address, bare or in brackets, in its canonical text form; nil if it is none.
    public static func ipv6Literal(_ text: String) -> String? {
        let bare = text.hasPrefix("[") && text.hasSuffix("]") ? String(text.dropFirst().dropLast()) : text
        guard bare.contains(":"), bare.utf8.count <= 45 else { return nil }
        var address = in6_addr()
        guard inet_pton(AF_INET6, bare, &address) == 1 else { return nil }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
