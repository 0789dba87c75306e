import WAFTokenCore

/// Where a listener listens: a Unix socket path, or a loopback address with a port. Anything else
/// (an address other hosts can reach) is refused: the token is a bearer secret.
public enum ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// The longest path a Unix socket address holds on Linux: `sun_path` is 108 bytes with its NUL.
    public static let maximumPathBytes = 107

    case unix(String)
    case loopback(host: String, port: Int)

    /// `/run/x.sock`, `127.0.0.1:8089`, `[::1]:8089`, `localhost:8089`; nil for anything else.
    /// Port 0 takes a free port (the status shows which).
    public init?(_ text: String) {
        if text.hasPrefix("/") {
            guard !text.utf8.contains(0) else { return nil }
            self = .unix(text)
            return
        }
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard WAFHost.isLoopback(host) else { return nil }
        self = .loopback(host: host, port: port)
    }

    public var description: String {
        switch self {
        case .unix(let path): path
        case .loopback(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}
