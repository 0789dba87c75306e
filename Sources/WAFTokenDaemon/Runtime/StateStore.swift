import Logging
import SystemPackage
import WAFChallenge
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// The last token and its fetch time in `stateDirectory`, so that a restarted daemon serves a
/// still-fresh token at once (SIDECAR.md "Sinks and state").
struct StateStore: Sendable {
    struct Record: Codable, Sendable, Equatable {
        var value: String
        var fetchedAt: Date
        /// The token is good only for the web ACL and domain it was fetched for.
        var applicationIntegrationUrl: String
        var domainName: String
    }

    static let fileName = "token.json"

    let directory: String
    var path: String { directory + "/" + Self.fileName }

    /// The saved token for `configuration`, nil if there is none or it is for another web ACL or
    /// domain. An unreadable file is an error (exit 71); a damaged one is set aside and logged.
    func load(for configuration: WAFConfiguration, logger: Logger) throws(DaemonFailure) -> WAFTokenProviderOptions.RestoredToken? {
        do {
            try FileDescriptor.open(FilePath(directory), .readOnly, options: .directory).close()
        } catch Errno.noSuchFileOrDirectory {
            return nil
        } catch {
            throw DaemonFailure(.osError, "cannot read the state directory \(directory): \(error)")
        }
        let bytes: [UInt8]
        do {
            let file = try FileDescriptor.open(FilePath(path), .readOnly)
            defer { try? file.close() }
            bytes = try Self.readAll(file, limit: 64 * 1024)
        } catch Errno.noSuchFileOrDirectory {
            return nil
        } catch {
            throw DaemonFailure(.osError, "cannot read the saved token \(path): \(error)")
        }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let record = try? decoder.decode(Record.self, from: Data(bytes)), VerifyOutcome.isUsableToken(record.value) else {
            logger.warning("the saved token is damaged; starting without it", metadata: ["path": "\(path)"])
            return nil
        }
        guard record.applicationIntegrationUrl == configuration.tokenServiceBaseURL, record.domainName == configuration.domainName else {
            logger.info("the saved token is for another web ACL or domain; not used", metadata: ["path": "\(path)"])
            return nil
        }
        return .init(value: record.value, fetchedAt: record.fetchedAt)
    }

    /// Saves `token` (mode 0600: it is a bearer secret), creating the directory if needed.
    func save(_ token: WAFToken, for configuration: WAFConfiguration) throws {
        if mkdir(directory, 0o700) != 0, errno != EEXIST { throw Errno(rawValue: errno) }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        let record = Record(
            value: token.value, fetchedAt: token.fetchedAt, applicationIntegrationUrl: configuration.tokenServiceBaseURL,
            domainName: configuration.domainName)
        try AtomicFile.write(Array(try encoder.encode(record)), to: path, mode: .ownerReadWrite)
    }

    private static func readAll(_ file: FileDescriptor, limit: Int) throws -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let count = try chunk.withUnsafeMutableBytes { try file.read(into: $0) }
            if count == 0 { break }
            bytes += chunk.prefix(count)
        }
        return bytes
    }
}
