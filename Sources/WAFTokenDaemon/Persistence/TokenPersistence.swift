import Dispatch
import Logging
import ServiceLifecycle
import SystemPackage
import WAFTokenCore

/// The files other programs read tokens from (each provider's token file, the one cookie jar with
/// a cookie per provider) and each provider's state file, kept to what the providers' latest
/// records say, on one serial queue: a slower write of an older token never overwrites a newer
/// one. A provider's records are taken for the identity it is told only, and a change of identity
/// (or the provider's removal) clears its files at once (STATE-3, STATE-4, MULTI-4).
///
/// A write that fails (a full disk, a read-only file system, permissions) is logged with the path
/// and the reason and tried again with back-off (1 s, doubling, at most every 30 s) until it
/// succeeds or a newer token supersedes it (STATE-5); the daemon serves from memory meanwhile.
/// The retry timer runs only while a write is pending.
final class TokenPersistence: Service, @unchecked Sendable {
    struct Layout: Sendable, Equatable {
        /// Each provider's identity, token file and state file, by name.
        var providers: [String: Target]
        var cookieJar: String?

        struct Target: Sendable, Equatable {
            var identity: WAFTokenIdentity
            var tokenFile: String?
            var stateFile: StateStore?
        }

        var paths: Set<String> {
            Set(providers.values.flatMap { [$0.tokenFile, $0.stateFile?.path] }.compactMap { $0 } + [cookieJar].compactMap { $0 })
        }
    }

    static let firstRetry = Duration.seconds(1)
    static let longestRetry = Duration.seconds(30)

    /// Whose a managed path is, and as what.
    private enum Owner {
        case cookieJar
        case tokenFile(provider: String)
        case stateFile(provider: String, StateStore)
    }

    private let queue = DispatchQueue(label: "waf-tokend.persistence")
    private let logger: Logger
    // Touched only on `queue`.
    private var layout: Layout {
        didSet { owners = Self.owners(of: layout) }
    }
    /// The layout by path: a record's write looks up its own paths, not every provider's (a
    /// hundred providers restoring their tokens at start-up made that quadratic, twice over).
    private var owners: [String: Owner]
    /// Providers whose records changed since their paths were last brought up to date; their
    /// writes are done together, so that records arriving together write the cookie jar once.
    private var dirty: Set<String> = []
    private var records: [String: WAFTokenRecord] = [:]
    /// Providers whose files this process keeps: those that reported a record, and those whose
    /// identity changed. Another's files are left as they are: at start-up, the first provider to
    /// report must not clear the files of one that has not yet restored its token from them.
    private var managed: Set<String> = []
    /// What each managed path holds as far as this process knows: the bytes, or nil for removed.
    private var written: [String: [UInt8]?] = [:]
    /// Paths whose last write failed, with the attempts so far.
    private var failing: [String: Int] = [:]
    private var retry: (any DispatchSourceTimer)?
    private var retryDelay = firstRetry

    init(layout: Layout, logger: Logger) {
        self.layout = layout
        self.owners = Self.owners(of: layout)
        self.logger = logger
        removeStaleTemporaries(in: layout.paths)
    }

    private func removeStaleTemporaries(in paths: Set<String>) {
        for (path, removed) in AtomicFile.removeStaleTemporaries(for: paths) where removed > 0 {
            logger.notice("removed \(removed) temporary file\(removed == 1 ? "" : "s") an earlier run left beside \(path)")
        }
    }

    private static func owners(of layout: Layout) -> [String: Owner] {
        var owners: [String: Owner] = [:]
        for (name, target) in layout.providers {
            if let file = target.tokenFile { owners[file] = .tokenFile(provider: name) }
            if let state = target.stateFile { owners[state.path] = .stateFile(provider: name, state) }
        }
        if let jar = layout.cookieJar { owners[jar] = .cookieJar }
        return owners
    }

    /// Where to write from now on, and for whom. A provider whose identity changed, or that is
    /// gone, has its files cleared; files no provider writes any more are removed (RELOAD-4).
    func configure(_ new: Layout) {
        queue.async { [self] in
            for (name, target) in layout.providers where new.providers[name]?.identity != target.identity {
                records[name] = nil
                // Changed: its old files go now. Gone: its files are retired below, and one added
                // back later starts unmanaged, like any new provider.
                if new.providers[name] != nil { managed.insert(name) } else { managed.remove(name) }
            }
            let old = layout.paths
            layout = new
            dirty = []
            // Paths new to this process may hold what an earlier run's killed writer left.
            removeStaleTemporaries(in: new.paths.subtracting(old))
            reconcile(layout.paths.union(old.subtracting(new.paths)))
        }
    }

    /// Stores `record` of provider `name` (each provider calls this, in order, from its state context).
    func persist(_ record: WAFTokenRecord, of name: String) {
        queue.async { [self] in
            guard record.identity == layout.providers[name]?.identity else {
                logger.debug("dropped a token record of another identity", metadata: ["provider": "\(name)", "identity": "\(record.identity)"])
                return
            }
            guard record != records[name] else { return }
            records[name] = record
            managed.insert(name)
            if dirty.isEmpty { queue.async { [self] in writeDirty() } }
            dirty.insert(name)
        }
    }

    /// Waits until every write submitted so far is done (failed ones are not waited for).
    func flush() {
        queue.sync { writeDirty() }
    }

    func run() async throws {
        try? await gracefulShutdown()
        flush()
        queue.sync {
            retry?.cancel()
            if !failing.isEmpty { logger.error("stopping with writes that did not succeed", metadata: ["paths": "\(failing.keys.sorted())"]) }
        }
    }

    // MARK: Writing (on `queue`)

    /// What a path should hold now: bytes, nil for "no file", or `.keep`: a state file whose token
    /// came from it (a loaded token is not written back as if fetched now), or a file of a provider
    /// that has not reported yet.
    private enum Wanted: Equatable {
        case bytes([UInt8]?)
        case keep
    }

    private func wanted(_ path: String) -> Wanted {
        switch owners[path] {
        case .cookieJar?:
            let cookies = layout.providers.keys.sorted().compactMap { records[$0]?.cookie }
            return .bytes(cookies.isEmpty ? nil : Array(CookieJar.text(cookies).utf8))
        case .tokenFile(let name)?:
            guard managed.contains(name) else { return .keep }
            return .bytes(records[name]?.token.map { Array($0.value.utf8) })
        case .stateFile(let name, let state)?:
            guard managed.contains(name) else { return .keep }
            guard let record = records[name], let token = record.token else { return .bytes(nil) }
            guard record.origin == .fetched else { return .keep }
            return .bytes(try? state.encode(token, for: record.identity))
        case nil:
            return .bytes(nil)
        }
    }

    /// The paths of the providers whose records changed (and the jar), brought up to date.
    private func writeDirty() {
        guard !dirty.isEmpty else { return }
        var paths: Set<String> = []
        for name in dirty {
            guard let target = layout.providers[name] else { continue }
            if let file = target.tokenFile { paths.insert(file) }
            if let state = target.stateFile { paths.insert(state.path) }
        }
        if let jar = layout.cookieJar { paths.insert(jar) }
        dirty = []
        reconcile(paths)
    }

    /// Brings `paths`, and those whose last write failed, to what they should hold.
    private func reconcile(_ paths: Set<String>) {
        for path in paths.union(failing.keys).sorted() {
            guard case .bytes(let bytes) = wanted(path) else {
                failing[path] = nil
                continue
            }
            if let known = written[path], known == bytes, failing[path] == nil { continue }
            do {
                if let bytes {
                    if case .stateFile(_, let state)? = owners[path] { try state.makeDirectory() }
                    try AtomicFile.write(bytes, to: path, mode: isStateFile(path) ? .ownerReadWrite : [.ownerReadWrite, .groupRead])
                } else {
                    try AtomicFile.remove(path)
                }
                written[path] = bytes
                if let attempts = failing.removeValue(forKey: path) {
                    logger.notice("\(what(path)) \(bytes == nil ? "removed" : "written") after \(attempts + 1) attempts", metadata: ["path": "\(path)"])
                } else if bytes != nil {
                    logger.debug("\(what(path)) written", metadata: ["path": "\(path)"])
                }
            } catch {
                written.removeValue(forKey: path)  // unknown now: written again whatever comes next
                let attempts = (failing[path] ?? 0) + 1
                failing[path] = attempts
                let message = "\(what(path)) not \(bytes == nil ? "removed" : "written")"
                let metadata: Logger.Metadata = ["path": "\(path)", "error": "\(error)", "attempt": "\(attempts)"]
                if attempts == 1 { logger.error("\(message); trying again", metadata: metadata) } else { logger.warning("\(message) yet", metadata: metadata) }
            }
        }
        armRetry()
    }

    private func armRetry() {
        if failing.isEmpty {
            retry?.cancel()
            retry = nil
            retryDelay = Self.firstRetry
            return
        }
        guard retry == nil else { return }
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + .nanoseconds(Int(retryDelay.components.seconds * 1_000_000_000)))
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            retry = nil
            retryDelay = min(retryDelay * 2, Self.longestRetry)
            reconcile([])
        }
        retry = timer
        timer.resume()
    }

    private func isStateFile(_ path: String) -> Bool {
        if case .stateFile? = owners[path] { return true }
        return false
    }

    private func what(_ path: String) -> String {
        switch owners[path] {
        case .cookieJar?: "cookie jar"
        case .stateFile?: "state file"
        case .tokenFile?, nil: "token file"
        }
    }
}
