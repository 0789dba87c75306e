#if canImport(Glibc)
import Glibc
#endif

extension Listener.Address {
    /// Where a socket someone else bound listens (one the service manager passed): its path, or
    /// its address and port; nil when it cannot be told.
    package static func bound(_ descriptor: CInt) -> Listener.Address? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) == 0 }
        }
        guard named else { return nil }
        switch Int32(storage.ss_family) {
        case AF_UNIX:
            let path = withUnsafeBytes(of: &storage) { raw -> String in
                let start = MemoryLayout<sa_family_t>.size
                let bytes = raw[start..<min(raw.count, Int(length))].prefix { $0 != 0 }
                return String(decoding: bytes, as: UTF8.self)
            }
            return .unix(path: path, mode: 0)
        case AF_INET, AF_INET6:
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST)), service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
            let found = withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    getnameinfo($0, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV) == 0
                }
            }
            guard found, let port = Int(Self.text(service)) else { return nil }
            return .tcp(host: Self.text(host), port: port)
        default:
            return nil
        }
    }

    /// Whether `self` and `other` name the same place to listen (a path, or an address and port;
    /// a Unix socket's mode aside).
    package func sameEndpoint(as other: Listener.Address) -> Bool {
        switch (self, other) {
        case (.unix(let a, _), .unix(let b, _)): a == b
        case (.tcp(let a, let p), .tcp(let b, let q)): p == q && Self.canonical(a) == Self.canonical(b)
        default: false
        }
    }

    private static func text(_ characters: [CChar]) -> String {
        String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// An IP address as getnameinfo writes it (`::1`, not `0:0:…:1`), `localhost` as 127.0.0.1.
    private static func canonical(_ host: String) -> String {
        if host == "localhost" { return "127.0.0.1" }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            inet_ntop(AF_INET6, &v6, &text, socklen_t(text.count))
            return Self.text(text)
        }
        return host
    }
}
