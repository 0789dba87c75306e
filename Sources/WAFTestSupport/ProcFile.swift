#if canImport(Glibc)
import Glibc
#endif

/// The whole of a file under /proc, read to its end. Foundation's `String(contentsOfFile:)` reads
/// a file whose size is 0 (as /proc's are) in 4 KiB reads and stops at the first short one; /proc
/// hands out whole lines, so the first read of a 25,050-byte /proc/net/tcp gave 4,050 bytes and
/// it stopped there. A listener past line 27 (a loaded suite has dozens) was never found, and
/// Traefik "listened on no port" for 60 s.
public func procFile(_ path: String) -> String? {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count >= 0 else { return nil }
        if count == 0 { break }
        bytes += chunk[0..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}
