import CLibrariesOnDemand
import NIOConcurrencyHelpers
import WAFDelivery

#if canImport(Glibc)
import Glibc
#endif

/// What the process does when a library it loads on first use turns out missing mid-run
/// (Sources/CLibrariesOnDemand: a broken installation), before it ends with status 1: the groups of
/// the children it started end as they would at a stop (exec's command, run actions: HOOK-7,
/// EXEC-5), and exec's private token file goes. Not the rest of a stop: the thread that found the
/// library missing holds a connection or a challenge it cannot finish.
enum LibraryFailure {
    private static let privatePaths = NIOLockedValueBox<[String]>([])

    static func install() {
        waf_library_on_failure { LibraryFailure.handle() }
    }

    /// Files, then the directories that held them: removed in this order.
    static func removeOnFailure(_ paths: [String]) {
        privatePaths.withLockedValue { $0 = paths }
    }

    private static func handle() {
        Spawned.endEveryGroup(grace: Spawned.hookGrace)
        for path in privatePaths.withLockedValue({ $0 }) where unlink(path) != 0 { rmdir(path) }
    }
}
