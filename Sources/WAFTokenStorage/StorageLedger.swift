import Logging
import SystemPackage
import WAFTokenCore

/// What `TokenPersistence` knows and wants of every file, and the writes that bring one to the
/// other: a value its queue changes one call at a time.
struct StorageLedger {
    private let logger: Logger
    private var layout: StorageLayout
    private var owners: [String: StorageLayout.Owner]
    /// Providers whose records changed since their paths were last brought up to date; their
    /// writes are done together, so that records arriving together write a cookie jar once.
    private var dirty: Set<String> = []
    private var records: [String: WAFTokenRecord] = [:]
    /// The latest record of a provider the layout does not have yet, by name, since the last
    /// `configure`: a provider a reload adds starts (in `prepare`) before the new layout is in
    /// force, and its first token (restored, or fetched quickly) must not be lost. The next
    /// `configure` takes those it now expects and forgets the rest; a provider retired meanwhile
    /// (a refused reload's) is forgotten at once (`forget`). A provider the layout has never
    /// lands here: a record of another identity than its own is an old one, and dropped.
    private var early: [String: WAFTokenRecord] = [:]
    /// Providers whose files this process keeps: those that reported a record, and those whose
    /// identity changed. Another's files are left as they are: at start-up, the first provider to
    /// report must not clear the files of one that has not yet restored its token from them.
    private var managed: Set<String> = []
    /// What each managed path holds as far as this process knows: the bytes, or nil for removed.
    private var written: [String: [UInt8]?] = [:]
    /// Paths whose last write failed, with the attempts so far.
    private var failing: [String: Int] = [:]

    var failingPaths: Int { failing.count }
    /// A retry is scheduled; `generation` tells it from one that was superseded or stopped.
    private var retryPending = false
    private var generation = 0
    private var retryDelay = TokenPersistence.firstRetry

    init(layout: StorageLayout, logger: Logger) {
        self.layout = layout
        owners = layout.owners
        self.logger = logger
    }

    mutating func removeStaleTemporaries(in paths: Set<String>) {
        for (path, removed) in AtomicFile.removeStaleTemporaries(for: paths) where removed > 0 {
            logger.notice("removed \(removed) temporary file\(removed == 1 ? "" : "s") an earlier run left beside \(path)")
        }
    }

    /// The new layout; returns a retry to schedule, if one is due. Files the process made private
    /// stay private: a reload cannot know them.
    mutating func configure(_ new: StorageLayout) -> (Duration, generation: Int)? {
        var new = new
        new.ownerOnly.formUnion(layout.ownerOnly)
        for (name, target) in layout.providers where new.providers[name]?.identity != target.identity {
            records[name] = nil
            // Changed: its old files go now. Gone: its files are retired below, and one added
            // back later starts unmanaged, like any new provider.
            if new.providers[name] != nil { managed.insert(name) } else { managed.remove(name) }
        }
        let old = layout.paths
        layout = new
        owners = new.owners
        dirty = []
        for (name, record) in early where new.providers[name]?.identity == record.identity {
            records[name] = record
            managed.insert(name)
        }
        early = [:]
        // Paths new to this process may hold what an earlier run's killed writer left.
        removeStaleTemporaries(in: new.paths.subtracting(old))
        return reconcile(layout.paths.union(old.subtracting(new.paths)))
    }

    /// A provider that stopped before storage knew it (a refused reload had added it): nothing it
    /// reported is written later, should a reload add its name again.
    mutating func forget(_ name: String) {
        early[name] = nil
    }

    /// Takes `record` of `name`; true when it is the first change since the last write (the
    /// caller then schedules one).
    mutating func take(_ record: WAFTokenRecord, of name: String) -> Bool {
        guard let target = layout.providers[name] else {
            logger.debug("held the token record of a provider storage does not know yet", metadata: ["provider": "\(name)"])
            early[name] = record
            return false
        }
        guard record.identity == target.identity else {
            logger.debug("dropped a token record of another identity", metadata: ["provider": "\(name)", "identity": "\(record.identity)"])
            return false
        }
        guard record != records[name] else { return false }
        records[name] = record
        managed.insert(name)
        defer { dirty.insert(name) }
        return dirty.isEmpty
    }

    /// The paths of the providers whose records changed (and their jars), brought up to date.
    mutating func writeDirty() -> (Duration, generation: Int)? {
        guard !dirty.isEmpty else { return nil }
        let paths = Set(dirty.flatMap { layout.paths(of: $0) })
        dirty = []
        return reconcile(paths)
    }

    /// A scheduled retry came due; another is returned while writes still fail.
    mutating func retryDue(_ generation: Int) -> (Duration, generation: Int)? {
        guard retryPending, generation == self.generation else { return nil }
        retryPending = false
        retryDelay = min(retryDelay * 2, TokenPersistence.longestRetry)
        return reconcile([])
    }

    /// Whether every file of provider `name` holds `token` as written (its token file and jars
    /// up to date, none of them failing); nil when the ledger's record of it is another token.
    func holds(_ token: String, of name: String) -> Bool? {
        guard records[name]?.token?.value == token else { return nil }
        return layout.paths(of: name).allSatisfy { path in
            guard failing[path] == nil, case .bytes(let bytes) = wanted(path) else { return failing[path] == nil }
            return written[path] == bytes
        }
    }

    /// No more retries (the daemon stops); what still fails is logged.
    mutating func stop() {
        retryPending = false
        generation += 1
        if !failing.isEmpty { logger.error("stopping with writes that did not succeed", metadata: ["paths": "\(failing.keys.sorted())"]) }
    }

    // MARK: Writing

    /// What a path should hold now: bytes, nil for "no file", or `.keep`: a state file whose token
    /// came from it (a loaded token is not written back as if fetched now), or a file of a provider
    /// that has not reported yet.
    private enum Wanted: Equatable {
        case bytes([UInt8]?)
        case keep
    }

    private func wanted(_ path: String) -> Wanted {
        switch owners[path] {
        case .cookieJar(let jar)?:
            let cookies = jar.providers.sorted().compactMap { records[$0]?.cookie }
            return .bytes(cookies.isEmpty ? nil : Array(CookieJar.text(cookies).utf8))
        case .tokenFile(let name, _, _)?:
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

    /// Brings `paths`, and those whose last write failed, to what they should hold.
    private mutating func reconcile(_ paths: Set<String>) -> (Duration, generation: Int)? {
        for path in paths.union(failing.keys).sorted() {
            guard case .bytes(let bytes) = wanted(path) else {
                failing[path] = nil
                continue
            }
            if let known = written[path], known == bytes, failing[path] == nil { continue }
            do {
                try write(bytes, to: path)
                written[path] = bytes
                if let attempts = failing.removeValue(forKey: path) {
                    logger.notice(
                        "\(what(path)) \(bytes == nil ? "removed" : "written") after \(attempts + 1) attempts", metadata: ["path": "\(path)"])
                } else if bytes != nil {
                    logger.debug("\(what(path)) written", metadata: ["path": "\(path)"])
                }
            } catch {
                written.removeValue(forKey: path)  // unknown now: written again whatever comes next
                let attempts = (failing[path] ?? 0) + 1
                failing[path] = attempts
                let message = "\(what(path)) not \(bytes == nil ? "removed" : "written")"
                let metadata: Logger.Metadata = ["path": "\(path)", "error": "\(error)", "attempt": "\(attempts)"]
                if attempts == 1 {
                    logger.error("\(message); trying again", metadata: metadata)
                } else {
                    logger.warning("\(message) yet", metadata: metadata)
                }
            }
        }
        return armRetry()
    }

    private func write(_ bytes: [UInt8]?, to path: String) throws {
        guard let bytes else { return try AtomicFile.remove(path) }
        switch owners[path] {
        case .stateFile(_, let state)?:
            try state.makeDirectory()
            try AtomicFile.write(bytes, to: path, mode: .ownerReadWrite)
        case .tokenFile(_, _, ownerOnly: true)?:
            try AtomicFile.write(bytes, to: path, mode: .ownerReadWrite)
        case .tokenFile(_, let group, ownerOnly: false)?:
            try AtomicFile.write(bytes, to: path, mode: [.ownerReadWrite, .groupRead], group: group)
        case .cookieJar(let jar)?:
            try AtomicFile.write(bytes, to: path, mode: [.ownerReadWrite, .groupRead], group: jar.group)
        case nil:
            break
        }
    }

    private mutating func armRetry() -> (Duration, generation: Int)? {
        if failing.isEmpty {
            retryPending = false
            retryDelay = TokenPersistence.firstRetry
            return nil
        }
        guard !retryPending else { return nil }
        retryPending = true
        generation += 1
        return (retryDelay, generation)
    }

    private func what(_ path: String) -> String {
        switch owners[path] {
        case .cookieJar?: "cookie jar"
        case .stateFile?: "state file"
        case .tokenFile?, nil: "token file"
        }
    }
}
