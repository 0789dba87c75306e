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
    /// Exec's private directory: its path, and a descriptor opened when it was made, so that what
    /// is emptied is that directory even if the path is made to name another.
    private struct Directory {
        let path: String
        let descriptor: Int32
        let identity: (dev_t, ino_t)
    }
    private static let privateDirectory = NIOLockedValueBox<Directory?>(nil)

    /// Idempotent; before anything is made that the handler must remove.
    static func install() {
        // Descriptors the handler lets go of first: a process at its limit (busy connections)
        // could otherwise not read `/proc` to see which groups still run, and would take them
        // for ended before their SIGKILL, nor list exec's directory.
        reserved.withLockedValue { reserved in
            while reserved.count < 4 {
                let descriptor = open("/dev/null", O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { break }
                reserved.append(descriptor)
            }
        }
        waf_library_on_failure { LibraryFailure.handle() }
    }
    private static let reserved = NIOLockedValueBox<[Int32]>([])

    /// Exec's private directory, just made: removed with what it holds. False when it cannot be
    /// opened (no descriptor left): exec does not start a child whose token it could not take away.
    static func removeOnFailure(directory path: String) -> Bool {
        let descriptor = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            close(descriptor)
            return false
        }
        privateDirectory.withLockedValue { $0 = Directory(path: path, descriptor: descriptor, identity: (status.st_dev, status.st_ino)) }
        return true
    }

    /// Before a clean stop exits: never returns while the handler runs, which ends the process.
    static func waitIfFailing() {
        waf_library_wait_if_failing()
    }

    private static func handle() -> Never {
        reserved.withLockedValue { reserved in
            reserved.forEach { close($0) }
            reserved = []
        }
        // Under the children's list, held to the end: no child starts, and exec's waiter reports no
        // child's end (a stop with the child's status), while the groups end and the files go.
        Spawned.endEveryGroup(within: .seconds(5)) {
            if let directory = privateDirectory.withLockedValue({ $0 }) { remove(directory) }
            _exit(1)
        }
    }

    /// A token write may put a file in the directory while it is emptied (a refresh finishing): it
    /// is emptied until it can be removed, after which no write can create anything there. The
    /// child (the same user) may have made directories in it: those are emptied too, to a depth
    /// that bounds the descriptors held at once.
    private static func remove(_ directory: Directory) {
        for _ in 0..<100 {
            // The token first, by name, each time (a write may have put it back): listing the
            // directory needs a descriptor, which a process at its limit may not get.
            unlinkat(directory.descriptor, "token", 0)
            empty(directory.descriptor, depth: 16)
            var status = stat()
            guard lstat(directory.path, &status) == 0, (status.st_dev, status.st_ino) == directory.identity else { return }
            if rmdir(directory.path) == 0 || errno == ENOENT { return }
            // A writer between the emptying and the rmdir: it is given a moment to finish.
            usleep(1_000)
        }
    }

    private static func empty(_ descriptor: Int32, depth: Int) {
        let copy = dup(descriptor)
        guard copy >= 0, let stream = fdopendir(copy) else { return }
        defer { closedir(stream) }
        rewinddir(stream)
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name != ".", name != "..", unlinkat(descriptor, name, 0) != 0, errno == EISDIR, depth > 0 else { continue }
            let inner = openat(descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard inner >= 0 else { continue }
            empty(inner, depth: depth - 1)
            close(inner)
            unlinkat(descriptor, name, AT_REMOVEDIR)
        }
    }
}
