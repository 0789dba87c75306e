import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Replaces a file in one step: a reader sees the old contents or the new, never a torn mix, and a
/// power cut after the call cannot undo it. Write a temporary file beside it, fsync it, rename it
/// over the old one, fsync the directory.
enum AtomicFile {
    static func write(_ bytes: [UInt8], to path: String, mode: FilePermissions) throws {
        let target = FilePath(path)
        let directory = target.removingLastComponent()
        var template = Array((temporaryPrefix(for: target) + "XXXXXX").utf8CString)
        let descriptor = mkstemp(&template)
        guard descriptor >= 0 else { throw Errno(rawValue: errno) }
        let temporary = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let file = FileDescriptor(rawValue: descriptor)
        do {
            _ = try file.writeAll(bytes)
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
    static func remove(_ path: String) throws {
        if unlink(path) == 0 {
            try syncDirectory(FilePath(path).removingLastComponent())
        } else if errno != ENOENT {
            throw Errno(rawValue: errno)
        }
    }

    /// Removes what a killed writer left of its temporaries for `paths`: files named like ours,
    /// `.NAME.XXXXXX`, beside each. Each directory is read once, however many paths it holds (a
    /// read per path made a hundred providers' start-up quadratic). Returns how many, by path.
    static func removeStaleTemporaries(for paths: some Collection<String>) -> [String: Int] {
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

    private static func temporaryPrefix(for target: FilePath) -> String {
        target.removingLastComponent().appending(".\(target.lastComponent?.string ?? "file").").string
    }

    private static func syncDirectory(_ directory: FilePath) throws {
        let descriptor = try FileDescriptor.open(directory.string.isEmpty ? "." : directory, .readOnly, options: .directory)
        defer { try? descriptor.close() }
        guard fsync(descriptor.rawValue) == 0 else { throw Errno(rawValue: errno) }
    }
}
