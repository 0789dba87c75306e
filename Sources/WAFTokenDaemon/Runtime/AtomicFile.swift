import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Replaces a file in one step: a reader sees the old contents or the new, never a torn mix.
/// Write a temporary file beside it, fsync it, rename it over the old one, fsync the directory.
enum AtomicFile {
    static func write(_ bytes: [UInt8], to path: String, mode: FilePermissions) throws {
        let target = FilePath(path)
        let directory = target.removingLastComponent()
        var template = Array((target.removingLastComponent().appending(".\(target.lastComponent?.string ?? "file").XXXXXX")).string.utf8CString)
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
        // The rename itself is durable only once the directory is.
        if let directoryFile = try? FileDescriptor.open(directory, .readOnly, options: .directory) {
            fsync(directoryFile.rawValue)
            try? directoryFile.close()
        }
    }
}
