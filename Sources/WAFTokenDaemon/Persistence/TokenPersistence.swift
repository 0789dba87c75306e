import Dispatch
import Logging
import ServiceLifecycle
import SystemPackage
import WAFTokenCore

/// The files other programs read the token from (the token file, the cookie jar) and the state
/// file, written from the provider's records in the order they come, on one serial queue: a slower
/// write of an older token never overwrites a newer one. It holds what it writes to one identity at
/// a time: a record of another identity is dropped, and a change of identity clears every file at
/// once (STATE-3, STATE-4).
final class TokenPersistence: Service, @unchecked Sendable {
    struct Target: Sendable, Equatable {
        var identity: WAFTokenIdentity
        var stateDirectory: String?
        var tokenFile: String?
        var cookieJar: String?

        var paths: [String] { [tokenFile, cookieJar, stateDirectory.map { StateStore(directory: $0).path }].compactMap { $0 } }
    }

    private let queue = DispatchQueue(label: "waf-tokend.persistence")
    private let logger: Logger
    // Touched only on `queue`.
    private var target: Target
    private var last: WAFTokenRecord?

    init(target: Target, logger: Logger) {
        self.target = target
        self.logger = logger
        for path in target.paths {
            let removed = AtomicFile.removeStaleTemporaries(for: path)
            if removed > 0 { logger.notice("removed \(removed) temporary file\(removed == 1 ? "" : "s") an earlier run left beside \(path)") }
        }
    }

    /// Where to write from now on, and for whom.
    func configure(_ new: Target) {
        queue.async { [self] in
            let old = target
            target = new
            if new.identity != old.identity {
                // Another web ACL or domain: no file may hold the old identity's token, at any path.
                for path in Set(old.paths + new.paths) { remove(path) }
                last = nil
                return
            }
            for path in Set(old.paths).subtracting(new.paths) { remove(path) }
            if let last { write(last, onlyNewPaths: old) }
        }
    }

    /// Stores `record` (the provider calls this, in order, from its state context).
    func persist(_ record: WAFTokenRecord) {
        queue.async { [self] in
            guard record.identity == target.identity else {
                logger.debug("dropped a token record of another identity", metadata: ["identity": "\(record.identity)"])
                return
            }
            guard record != last else { return }
            last = record
            write(record, onlyNewPaths: nil)
        }
    }

    /// Waits until every write submitted so far is done.
    func flush() {
        queue.sync {}
    }

    func run() async throws {
        try? await gracefulShutdown()
        flush()
    }

    // MARK: Writing (on `queue`)

    private func write(_ record: WAFTokenRecord, onlyNewPaths old: Target?) {
        let state = target.stateDirectory.map(StateStore.init(directory:))
        guard let token = record.token else {
            for path in target.paths { remove(path) }
            return
        }
        if let path = target.tokenFile, path != old?.tokenFile {
            store(Array(token.value.utf8), at: path, what: "token file", token: token)
        }
        if let path = target.cookieJar, path != old?.cookieJar {
            store(Array(CookieJar.text(record.cookie).utf8), at: path, what: "cookie jar", token: token)
        }
        // A loaded token came from the state file (or cannot be trusted to be stored as fresh).
        if let state, record.origin == .fetched, state.directory != old?.stateDirectory {
            do {
                try state.save(token, for: record.identity)
            } catch {
                logger.error("the token could not be saved", metadata: ["path": "\(state.path)", "error": "\(error)"])
            }
        }
    }

    private func store(_ bytes: [UInt8], at path: String, what: String, token: WAFToken) {
        do {
            try AtomicFile.write(bytes, to: path, mode: [.ownerReadWrite, .groupRead])
            logger.debug("\(what) written", metadata: ["path": "\(path)", "token.fingerprint": "\(token.fingerprint)"])
        } catch {
            logger.error("\(what) not written", metadata: ["path": "\(path)", "error": "\(error)"])
        }
    }

    private func remove(_ path: String) {
        do {
            try AtomicFile.remove(path)
        } catch {
            logger.error("cannot remove \(path): \(error)")
        }
    }
}
