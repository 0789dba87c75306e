import Synchronization

/// Moves whenever what the provider publishes changes (a new token, staleness, settings): cached
/// answers built from it know they are out of date. The provider advances it on its state
/// context right after publishing; the fast path reads it once per request.
package final class SnapshotGeneration: Sendable {
    private let value = Atomic<UInt64>(0)

    package init() {}

    package var current: UInt64 { value.load(ordering: .acquiring) }

    @Sendable package func advance() {
        value.add(1, ordering: .releasing)
    }
}
