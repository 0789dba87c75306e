#if canImport(Glibc)
import Glibc
#endif

/// `egress.proxyCredentialsFile` (EGRESS-3): `user:password` for the forward proxy, on the file's
/// first line. A password others may read is refused, as ssh refuses such a key: at
/// `--check-config` and at start, before any request would send it.
public enum ProxyCredentials {
    /// What a configuration issue says is allowed.
    public static let allowed =
        "a regular file of mode 0600 or stricter, owned by root or the daemon's user (run as root: or the unit's waf-tokend user), user:password on its first line"

    /// The file's `user:password`, or why it cannot be used: words that follow the path in a
    /// configuration issue (and never hold the file's content).
    /// The shipped unit's `User=` (the Debian package makes it): its uid, if the account exists.
    public static var serviceUser: uid_t? {
        getpwnam("waf-tokend").map { $0.pointee.pw_uid }
    }

    /// `serviceUser`: the unit's user's uid (a test names another).
    public static func read(_ path: String, serviceUser: uid_t? = serviceUser) -> Result<String, EgressProblem> {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { return .failure(EgressProblem("cannot be read: \(String(cString: strerror(errno)))")) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            return .failure(EgressProblem("is not a regular file"))
        }
        guard info.st_mode & 0o077 == 0 else {
            return .failure(
                EgressProblem("has mode 0\(String(info.st_mode & 0o777, radix: 8)), and it holds a password: 0600 or stricter"))
        }
        // Another user's file of mode 0600 is theirs to rewrite: they would choose the proxy's
        // password the daemon sends (ssh refuses such a key for the same reason). Run as root
        // (`sudo waf-tokend --check-config` for the shipped unit), the unit's own user's file is
        // taken too, and no other account's.
        let unitsUser = geteuid() == 0 && serviceUser.map { info.st_uid == $0 } == true
        guard info.st_uid == 0 || info.st_uid == geteuid() || unitsUser else {
            return .failure(EgressProblem("is owned by uid \(info.st_uid), neither root nor the daemon's user (uid \(geteuid()))"))
        }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = bytes.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        let line = String(decoding: bytes.prefix(max(count, 0)).prefix { $0 != 10 && $0 != 13 }, as: UTF8.self)
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
            return .failure(EgressProblem("does not hold user:password on its first line"))
        }
        return .success(line)
    }
}
