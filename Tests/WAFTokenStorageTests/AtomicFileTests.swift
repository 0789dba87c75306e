import Foundation
import SystemPackage
import Testing
import WAFTestTraits

@testable import WAFTokenStorage

#if canImport(Glibc)
import Glibc
#endif

/// What `AtomicFile` opens on its way: a token file's temporary and its directory.
@Suite("Files replaced in one step", .offPool)
struct AtomicFileTests {
    static func closesOnExec(_ descriptor: FileDescriptor) -> Bool {
        fcntl(descriptor.rawValue, F_GETFD) & FD_CLOEXEC != 0
    }

    @Test("A temporary and the directory are closed on exec: a child started while a token is written never holds them")
    func closedOnExec() throws {
        let directory = NSTemporaryDirectory() + "waf-atomic-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (temporary, path) = try AtomicFile.openTemporary(beside: FilePath(directory + "/token"))
        defer { try? temporary.close() }
        #expect(Self.closesOnExec(temporary))
        let folder = try AtomicFile.openDirectory(FilePath(directory))
        defer { try? folder.close() }
        #expect(Self.closesOnExec(folder))

        // Named and made as mkstemp would: `.NAME.` and six characters, the owner's alone, so a
        // killed writer's leftover is found and removed at the next start.
        let name = String(path.dropFirst(directory.count + 1))
        #expect(name.hasPrefix(".token.") && name.count == ".token.".count + 6, "\(name)")
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o600)
        #expect(AtomicFile.removeStaleTemporaries(for: [directory + "/token"]) == [directory + "/token": 1])
    }

    @Test("A write replaces the file whole, with its mode, and leaves no temporary")
    func writeReplaces() throws {
        let directory = NSTemporaryDirectory() + "waf-atomic-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/token"
        try AtomicFile.write(Array("first".utf8), to: path, mode: [.ownerReadWrite])
        try AtomicFile.write(Array("second".utf8), to: path, mode: [.ownerReadWrite, .groupRead])
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "second")
        var status = stat()
        #expect(stat(path, &status) == 0 && status.st_mode & 0o777 == 0o640)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["token"])
    }
}
