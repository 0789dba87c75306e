import Dispatch
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import WAFTokenCore

/// The files other programs read tokens from (each provider's token file, the cookie jars) and
/// each provider's state file, kept to what the providers' latest records say, on one serial
/// queue: a slower write of an older token never overwrites a newer one. A provider's records are
/// taken for the identity it is told only, and a change of identity (or the provider's removal)
/// clears its files at once (STATE-3, STATE-4, MULTI-4).
///
/// A write that fails (a full disk, a read-only file system, permissions) is logged with the path
/// and the reason and tried again with back-off (1 s, doubling, at most every 30 s) until it
/// succeeds or a newer token supersedes it (STATE-5); the daemon serves from memory meanwhile.
/// The retry is scheduled only while a write is pending.
package final class TokenPersistence: Service, Sendable {
    package static let firstRetry = Duration.seconds(1)
    package static let longestRetry = Duration.seconds(30)

    private let queue = DispatchQueue(label: "waf-tokend.persistence")
    /// What is known and wanted of every file. Used on `queue` only, so its lock is never waited
    /// for: it is there so that the compiler, not a comment, keeps the state to one thread at a time.
    private let ledger: NIOLockedValueBox<StorageLedger>
    /// Told how many paths' last writes failed, whenever that changes (the daemon's metrics).
    private let failingChanged: @Sendable (Int) -> Void

    package init(layout: StorageLayout, logger: Logger, failingChanged: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.failingChanged = failingChanged
        var ledger = StorageLedger(layout: layout, logger: logger)
        ledger.removeStaleTemporaries(in: layout.paths)
        self.ledger = NIOLockedValueBox(ledger)
    }

    /// Where to write from now on, and for whom. A provider whose identity changed, or that is
    /// gone, has its files cleared; files no provider writes any more are removed (RELOAD-4).
    package func configure(_ new: StorageLayout) {
        queue.async { [self] in retry(after: ledger.withLockedValue { $0.configure(new) }) }
    }

    /// `configure`, returning once the new layout is in force: the files of a provider whose
    /// identity changed or that is gone are removed by then (a reload waits for it, TENANT-2).
    package func configure(_ new: StorageLayout) async {
        await withCheckedContinuation { continuation in
            queue.async { [self] in
                retry(after: ledger.withLockedValue { $0.configure(new) })
                continuation.resume()
            }
        }
    }

    /// Stores `record` of provider `name` (each provider calls this, in order, from its state context).
    package func persist(_ record: WAFTokenRecord, of name: String) {
        queue.async { [self] in
            // Records arriving together are written together: the cookie jar once.
            if ledger.withLockedValue({ $0.take(record, of: name) }) {
                queue.async { [self] in retry(after: ledger.withLockedValue { $0.writeDirty() }) }
            }
        }
    }

    /// Provider `name` stopped: a record it made before storage knew it is forgotten (after every
    /// record it submitted, which come first on the same queue).
    package func forget(_ name: String) {
        queue.async { [self] in ledger.withLockedValue { $0.forget(name) } }
    }

    /// Whether provider `name`'s files hold `token` now, every write submitted so far done first
    /// (a delivery action tells a program of a token only once its files hold it). False while a
    /// write of it fails; false too when a newer token superseded it.
    package func holds(_ token: String, of name: String) -> Bool {
        queue.sync {
            retry(after: ledger.withLockedValue { $0.writeDirty() })
            return ledger.withLockedValue { $0.holds(token, of: name) } ?? false
        }
    }

    /// Waits until every write submitted so far is done (failed ones are not waited for).
    package func flush() {
        queue.sync { retry(after: ledger.withLockedValue { $0.writeDirty() }) }
    }

    package func run() async throws {
        try? await gracefulShutdown()
        flush()
        queue.sync { ledger.withLockedValue { $0.stop() } }
    }

    /// Tries the failing writes again after `delay` (nil: nothing to retry, or a retry is pending).
    private func retry(after delay: (Duration, generation: Int)?) {
        failingChanged(ledger.withLockedValue { $0.failingPaths })
        guard let (delay, generation) = delay else { return }
        let nanoseconds = delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [weak self] in
            guard let self else { return }
            retry(after: ledger.withLockedValue { $0.retryDue(generation) })
        }
    }
}

extension TokenPersistence: CustomStringConvertible {
    /// ServiceLifecycle names each service `"\(service)"`; without this, reflection over its
    /// properties (docs/performance.md, "Start-up in detail").
    package var description: String { "TokenPersistence" }
}
