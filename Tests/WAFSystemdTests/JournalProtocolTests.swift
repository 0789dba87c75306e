import CLibrariesOnDemand
import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits

#if canImport(Glibc)
import Glibc
#endif

/// The journal's native protocol as the daemon speaks it without libsystemd (systemd.io's "Native
/// Journal Protocol"), read by a socket of the test's where journald's would be: a field per
/// line, a value with a newline in the binary form (name, newline, 64-bit little-endian length,
/// value), an entry too large for a datagram as a sealed memfd passed with SCM_RIGHTS, and what
/// libsystemd refuses refused. journald itself reads the daemon's entries in SystemdTests.
@Suite("The journal's protocol, spoken", .offPool)
struct JournalProtocolTests {
    /// A datagram socket bound in a scratch directory, and a reader of what reaches it.
    final class Journal {
        let path: String
        let descriptor: Int32

        init() throws {
            path = try scratchDirectory("waf-journal-protocol").appendingPathComponent("socket").path
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            try #require(bound == 0, "the test's journal socket: errno \(errno)")
            var second = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &second, socklen_t(MemoryLayout<timeval>.size))
        }

        deinit { close(descriptor) }

        /// Sends `fields` as `sd_journal_sendv` would; its result.
        func send(_ fields: [[UInt8]]) -> Int32 {
            var storage = fields
            return storage.withUnsafeMutableBufferPointer { buffers in
                var vectors = buffers.indices.map { index in
                    buffers[index].withUnsafeMutableBytes { iovec(iov_base: $0.baseAddress, iov_len: $0.count) }
                }
                return waf_journal_sendv_to(path, &vectors, Int32(vectors.count))
            }
        }

        /// The next entry: a datagram's bytes, or the bytes of the file a descriptor-only datagram
        /// passed, with whether it came as a file and whether the file was sealed.
        func receive() -> (bytes: [UInt8], asFile: Bool, sealed: Bool)? {
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var control = [UInt8](repeating: 0, count: 64)
            let count = buffer.withUnsafeMutableBytes { bytes in
                control.withUnsafeMutableBytes { controlBytes in
                    var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
                    return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                        var message = msghdr(
                            msg_name: nil, msg_namelen: 0, msg_iov: vectorPointer, msg_iovlen: 1, msg_control: controlBytes.baseAddress,
                            msg_controllen: controlBytes.count, msg_flags: 0)
                        let received = recvmsg(descriptor, &message, 0)
                        return (received, message.msg_controllen)
                    }
                }
            }
            guard count.0 >= 0 else { return nil }
            if count.0 > 0 || count.1 == 0 { return (Array(buffer[..<count.0]), false, false) }
            // SCM_RIGHTS: one int after the cmsghdr.
            let passed = control.withUnsafeBytes { $0.load(fromByteOffset: MemoryLayout<cmsghdr>.size, as: Int32.self) }
            defer { close(passed) }
            let seals = fcntl(passed, 1034)  // F_GET_SEALS
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65536)
            var offset: off_t = 0
            while true {
                let read = pread(passed, &chunk, chunk.count, offset)
                guard read > 0 else { break }
                bytes += chunk[..<read]
                offset += off_t(read)
            }
            // F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE
            return (bytes, true, seals == 0x0F)
        }
    }

    @Test("fields a line each; a value with a newline in the binary form; SYSLOG_IDENTIFIER added only when missing")
    func fieldsAndBinaryForm() throws {
        let journal = try Journal()
        #expect(journal.send([Array("MESSAGE=hello".utf8), Array("SYSLOG_IDENTIFIER=waf-tokend".utf8)]) == 0)
        let plain = try #require(journal.receive())
        #expect(String(decoding: plain.bytes, as: UTF8.self) == "MESSAGE=hello\nSYSLOG_IDENTIFIER=waf-tokend\n" && !plain.asFile)

        #expect(journal.send([Array("MESSAGE=two\nlines".utf8), Array("PRIORITY=6".utf8)]) == 0)
        let binary = try #require(journal.receive())
        let value = Array("two\nlines".utf8)
        var length = UInt64(value.count).littleEndian
        let expected =
            Array("MESSAGE\n".utf8) + withUnsafeBytes(of: &length) { Array($0) } + value + Array("\nPRIORITY=6\n".utf8)
            + Array("SYSLOG_IDENTIFIER=".utf8)
        #expect(Array(binary.bytes.prefix(expected.count)) == expected, "\(binary.bytes)")
        // The process's own short name, as libsystemd adds it.
        #expect(binary.bytes.last == UInt8(ascii: "\n") && binary.bytes.count > expected.count + 1)
    }

    @Test("an entry larger than a datagram goes as a sealed memfd, whole")
    func largeEntryAsFile() throws {
        let journal = try Journal()
        // Past the 8 MiB send buffer the journal socket asks for (4 MiB here, 208 KiB by default).
        let large = Array("MESSAGE=".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 9 << 20)
        #expect(journal.send([large, Array("SYSLOG_IDENTIFIER=waf-tokend".utf8)]) == 0)
        let entry = try #require(journal.receive())
        #expect(entry.asFile && entry.sealed, "as a file: \(entry.asFile), sealed: \(entry.sealed)")
        #expect(entry.bytes == large + Array("\nSYSLOG_IDENTIFIER=waf-tokend\n".utf8), "\(entry.bytes.count) bytes")
    }

    @Test(
        "what libsystemd refuses is refused: no '=', an empty name, a newline in the name, a field of one byte",
        arguments: ["no-equals", "=value", "NA\nME=value", "X"])
    func refused(field: String) throws {
        let journal = try Journal()
        #expect(journal.send([Array(field.utf8)]) == -EINVAL)
    }

    @Test("no journal listening: nothing to do, as libsystemd answers then")
    func noJournal() throws {
        let missing = try scratchDirectory("waf-journal-none").appendingPathComponent("socket").path
        var field = Array("MESSAGE=nobody".utf8)
        let sent = field.withUnsafeMutableBytes { bytes in
            var vector = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
            return waf_journal_sendv_to(missing, &vector, 1)
        }
        #expect(sent == 0)
    }
}
