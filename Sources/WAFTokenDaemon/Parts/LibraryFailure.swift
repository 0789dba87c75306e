import CLibrariesOnDemand
import NIOConcurrencyHelpers
import WAFDelivery

#if canImport(Glibc)
import Glibc
#endif

/// What the process does when a library it loads on first use turns out missing mid-run
/// (Sources/CLibrariesOnDemand: a broken installation), before it ends with status 1: the groups of
/// the children it started end as they would at a stop (exec's command, run actions: HOOK-7,
/// EXEC-5), and exec's private token directory goes. Not the rest of a stop: the thread that found
/// the library missing holds a connection or a challenge it cannot finish.
enum LibraryFailure {
    private static let privateDirectory = NIOLockedValueBox<String?>(nil)

    /// Idempotent; before anything is made that the handler must remove.
    static func install() {
        waf_library_on_failure { LibraryFailure.handle() }
    }

    /// Exec's private directory, removed with what it holds.
    static func removeOnFailure(directory: String) {
        privateDirectory.withLockedValue { $0 = directory }
    }

    private static func handle() -> Never {
        // Under the children's list, held to the end: no child starts, and exec's waiter reports no
        // child's end (a stop with the child's status), while the groups end and the files go.
        Spawned.endEveryGroup(grace: Spawned.hookGrace) {
            if let directory = privateDirectory.withLockedValue({ $0 }) { remove(directory) }
            _exit(1)
        }
    }

    /// A token write may put a file in the directory while it is emptied (a refresh finishing): it
    /// is emptied until it can be removed, after which no write can create anything there.
    private static func remove(_ directory: String) {
        for _ in 0..<100 {
            if let stream = opendir(directory) {
                while let entry = readdir(stream) {
                    let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                    if name != ".", name != ".." { unlink(directory + "/" + name) }
                }
                closedir(stream)
            }
            if rmdir(directory) == 0 || errno == ENOENT { return }
        }
    }
}
