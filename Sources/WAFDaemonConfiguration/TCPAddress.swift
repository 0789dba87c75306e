import WAFTokenCore

/// An address with a port to listen on, on any interface (`0.0.0.0:9464`, `[::]:9464`,
/// `127.0.0.1:9464`, `localhost:9464`): for a listener that never carries a token (`metrics.listen`).
public struct TCPAddress: Sendable, Hashable, CustomStringConvertible {
    public let host: String
    public let port: Int

    /// Nil unless `text` is an IP address (IPv6 in brackets) or `localhost`, a colon and a port.
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") {
            guard host.hasSuffix("]") else { return nil }
            host = String(host.dropFirst().dropLast())
            guard host.contains(":"), WAFHost.isIPLiteral(host) else { return nil }
        } else {
            guard host == "localhost" || (!host.contains(":") && WAFHost.isIPLiteral(host)) else { return nil }
        }
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
