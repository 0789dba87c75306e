import Dispatch
import Logging
import SystemPackage
import WAFTokenCore

/// Files other programs read the token from (SIDECAR.md "Sinks"): the bare token, and a
/// Netscape/curl cookie jar with the `aws-waf-token` cookie of COOK-3. Both are rewritten
/// atomically on every new token, off the event loops and the provider's queue.
final class TokenSinks: Sendable {
    struct Paths: Sendable, Equatable {
        var tokenFile: String?
        var cookieJar: String?
    }

    private let queue = DispatchQueue(label: "waf-tokend.sinks")
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Writes `token` (and its cookie, when cookies are on) to the configured files.
    func write(_ token: WAFToken, cookie: WAFCookie?, to paths: Paths, completion: (@Sendable () -> Void)? = nil) {
        queue.async { [logger] in
            defer { completion?() }
            if let path = paths.tokenFile {
                Self.store(Array(token.value.utf8), at: path, mode: [.ownerReadWrite, .groupRead], what: "token file", token: token, logger: logger)
            }
            if let path = paths.cookieJar {
                let jar = cookie.map(Self.cookieJar) ?? Self.emptyJar
                Self.store(Array(jar.utf8), at: path, mode: [.ownerReadWrite, .groupRead], what: "cookie jar", token: token, logger: logger)
            }
        }
    }

    /// Waits until every write submitted so far is done.
    func flush() {
        queue.sync {}
    }

    private static func store(_ bytes: [UInt8], at path: String, mode: FilePermissions, what: String, token: WAFToken, logger: Logger) {
        do {
            try AtomicFile.write(bytes, to: path, mode: mode)
            logger.debug("\(what) written", metadata: ["path": "\(path)", "token.fingerprint": "\(token.fingerprint)"])
        } catch {
            logger.error("\(what) not written", metadata: ["path": "\(path)", "error": "\(error)"])
        }
    }

    static let emptyJar = "# Netscape HTTP Cookie File\n# Written by waf-tokend.\n"

    /// The cookie as a line of curl's cookie jar: domain, include-subdomains, path, secure,
    /// expiry (Unix seconds), name, value, separated by tabs.
    static func cookieJar(_ cookie: WAFCookie) -> String {
        let fields = [
            cookie.domain, cookie.includesSubdomains ? "TRUE" : "FALSE", cookie.path, cookie.secure ? "TRUE" : "FALSE",
            String(Int64(cookie.expires.timeIntervalSince1970)), WAFCookie.name, cookie.value,
        ]
        return emptyJar + fields.joined(separator: "\t") + "\n"
    }
}
