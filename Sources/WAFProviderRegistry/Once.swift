import Synchronization

/// The first caller wins.
package final class Once: Sendable {
    private let done = Atomic<Bool>(false)
    package init() {}

    package func claim() -> Bool { !done.exchange(true, ordering: .acquiringAndReleasing) }

    /// Whether someone claimed it already.
    package var isClaimed: Bool { done.load(ordering: .acquiring) }
}
