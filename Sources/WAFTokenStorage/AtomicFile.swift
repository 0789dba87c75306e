import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Replaces a file in one step: a reader sees the old contents or the new, never a torn mix, and a
/// power cut after the call cannot undo it. Write a temporary file beside it, fsync it, rename it
/// over the old one, fsync the directory.
package enum AtomicFile {
    /// With `group` (a name or a numeric id), the file belongs to that group before it takes the
    /// path's place: a reader of the group never finds it another group's, even for a moment.
    package static func write(_ bytes: [UInt8], to path: String, mode: FilePermissions, group: String? = nil) throws {
        let gid = try group.map(groupID)
        let target = FilePath(path)
        let directory = target.removingLastComponent()
        let (file, temporary) = try openTemporary(beside: target)
        let descriptor = file.rawValue
        do {
            _ = try file.writeAll(bytes)
            if let gid, fchown(descriptor, uid_t.max, gid) != 0 { throw GroupFailure(group: group!, reason: String(cString: strerror(errno))) }
            guard fchmod(descriptor, mode_t(mode.rawValue)) == 0, fsync(descriptor) == 0 else { throw Errno(rawValue: errno) }
            try file.close()
        } catch {
            _ = try? file.close()
            unlink(temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            let failure = Errno(rawValue: errno)
            unlink(temporary)
            throw failure
        }
        try syncDirectory(directory)
    }

    /// Removes a file and makes the removal durable; a missing file is fine.
    package static func remove(_ path: String) throws {
        if unlink(path) == 0 {
            try syncDirectory(FilePath(path).removingLastComponent())
        } else if errno != ENOENT {
            throw Errno(rawValue: errno)
        }
    }

    /// Removes what a killed writer left of its temporaries for `paths`: files named like ours,
    /// `.NAME.XXXXXX`, beside each. Each directory is read once, however many paths it holds (a
    /// read per path made a hundred providers' start-up quadratic). Returns how many, by path.
    package static func removeStaleTemporaries(for paths: some Collection<String>) -> [String: Int] {
        // Directory → (file name → its path as given).
        var byDirectory: [String: [String: String]] = [:]
        for path in paths {
            let target = FilePath(path)
            guard let name = target.lastComponent?.string else { continue }
            byDirectory[target.removingLastComponent().string, default: [:]][name] = path
        }
        var removed: [String: Int] = [:]
        for (directoryPath, names) in byDirectory {
            let directory = FilePath(directoryPath.isEmpty ? "." : directoryPath)
            guard let stream = opendir(directory.string) else { continue }
            defer { closedir(stream) }
            while let entry = readdir(stream) {
                let entryName = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                // `.` + the name + `.` + six characters of mkstemp's.
                let bytes = Array(entryName.utf8)
                guard bytes.count > 8, bytes[0] == UInt8(ascii: "."), bytes[bytes.count - 7] == UInt8(ascii: ".") else { continue }
                guard let path = names[String(decoding: bytes[1..<(bytes.count - 7)], as: UTF8.self)],
                    unlink(directory.appending(entryName).string) == 0
                else { continue }
                removed[path, default: 0] += 1
            }
        }
        return removed
    }

    /// The id of `group`, a name or a number.
    private static func groupID(_ group: String) throws -> gid_t {
        if let id = gid_t(group) { return id }
        var entry = Glibc.group()
        var result: UnsafeMutablePointer<Glibc.group>?
        var buffer = [CChar](repeating: 0, count: 65536)
        guard getgrnam_r(group, &entry, &buffer, buffer.count, &result) == 0, result != nil else {
            throw GroupFailure(group: group, reason: "no such group")
        }
        return entry.gr_gid
    }

    /// A file that cannot be given to its group (`sinks.group`): a failed write, retried as any.
    struct GroupFailure: Error, CustomStringConvertible {
        let group: String
        let reason: String
        var description: String { "cannot give the file to group \(group): \(reason)" }
    }

    /// A new file beside `target`, named like a temporary of it, and its path. Closed on exec: a
    /// hook or `exec`'s program started by another thread while it is open (a new token is written
    /// and announced at once) must not keep the token's bytes open, or the file after its rename.
    package static func openTemporary(beside target: FilePath) throws -> (FileDescriptor, String) {
        // mkstemp's names and mode, with O_CLOEXEC (mkostemp is a GNU extension Glibc's module leaves out).
        let prefix = temporaryPrefix(for: target)
        for _ in 0..<100 {
            let path = prefix + String((0..<6).map { _ in temporaryCharacters.randomElement()! })
            do {
                let options: FileDescriptor.OpenOptions = [.create, .exclusiveCreate, .closeOnExec]
                return (try FileDescriptor.open(path, .readWrite, options: options, permissions: [.ownerReadWrite]), path)
            } catch Errno.fileExists {
                continue
            }
        }
        throw Errno.fileExists
    }

    private static let temporaryCharacters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")

    /// A directory, to fsync; closed on exec, as the temporary is.
    package static func openDirectory(_ directory: FilePath) throws -> FileDescriptor {
        try FileDescriptor.open(directory.string.isEmpty ? "." : directory, .readOnly, options: [.directory, .closeOnExec])
    }

    private static func temporaryPrefix(for target: FilePath) -> String {
        target.removingLastComponent().appending(".\(target.lastComponent?.string ?? "file").").string
    }

    private static func syncDirectory(_ directory: FilePath) throws {
        let descriptor = try openDirectory(directory)
        defer { try? descriptor.close() }
        guard fsync(descriptor.rawValue) == 0 else { throw Errno(rawValue: errno) }
    }
}
