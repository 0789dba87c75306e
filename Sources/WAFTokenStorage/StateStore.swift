import Logging
import SystemPackage
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// The last token, its fetch time and its identity in `stateDirectory/token.json` (for the
/// provider `default`; `token.NAME.json` for another), so that a restarted daemon serves a
/// still-fresh token at once (STATE-1, MULTI-4).
package struct StateStore: Sendable, Equatable {
    package struct Record: Codable, Sendable, Equatable {
        package var value: String
        package var fetchedAt: Date
        /// The token is good only for the web ACL and domain it was fetched for.
        package var applicationIntegrationUrl: String
        package var domainName: String
    }

    package static let maximumBytes = 64 * 1024

    package let directory: String
    package let fileName: String
    package var path: String { directory + "/" + fileName }

    package init(directory: String, provider: String = WAFProviderName.defaultName) {
        self.directory = directory
        fileName = provider == WAFProviderName.defaultName ? "token.json" : "token.\(provider).json"
    }

    /// The saved token for `identity`, nil if there is none or it is another identity's. A damaged
    /// or unreadable file, or anything but a regular file, is set aside (`token.json.bad.<time>`),
    /// logged in one line, and the daemon starts without it: it never crash-loops on its own state.
    /// A state directory that cannot be looked into at all is an error (exit 71).
    package func load(for identity: WAFTokenIdentity, logger: Logger) throws(StateStoreFailure) -> WAFTokenProviderOptions.RestoredToken? {
        var info = stat()
        if lstat(path, &info) != 0 {
            if errno == ENOENT { return nil }
            throw StateStoreFailure("cannot read the saved token \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { return setAside("it is not a regular file", logger: logger) }
        guard let bytes = Self.read(path) else { return setAside("it cannot be read: \(String(cString: strerror(errno)))", logger: logger) }
        guard bytes.count <= Self.maximumBytes else { return setAside("it is larger than 64 KiB", logger: logger) }
        guard let record = Self.decode(bytes) else { return setAside("it is not a saved token", logger: logger) }
        guard record.applicationIntegrationUrl == identity.tokenServiceBaseURL, record.domainName == identity.domainName else {
            logger.info("the saved token is for another web ACL or domain; not used", metadata: ["path": "\(path)"])
            return nil
        }
        return .init(value: record.value, fetchedAt: record.fetchedAt)
    }

    /// The record in `bytes`, nil unless it is one with a token fit for a cookie.
    package static func decode(_ bytes: [UInt8]) -> Record? {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = SavedTime.parse(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an ISO 8601 time"))
            }
            return date
        }
        guard let record = try? decoder.decode(Record.self, from: Data(bytes)), WAFToken.isUsable(record.value) else { return nil }
        return record
    }

    /// The file's contents for `token` of `identity`.
    package func encode(_ token: WAFToken, for identity: WAFTokenIdentity) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        let record = Record(
            value: token.value, fetchedAt: token.fetchedAt, applicationIntegrationUrl: identity.tokenServiceBaseURL,
            domainName: identity.domainName)
        return Array(try encoder.encode(record))
    }

    /// The directory (mode 0700: it holds bearer secrets), if it is not there yet.
    package func makeDirectory() throws {
        if mkdir(directory, 0o700) != 0, errno != EEXIST { throw Errno(rawValue: errno) }
    }

    private func setAside(_ reason: String, logger: Logger) -> WAFTokenProviderOptions.RestoredToken? {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let aside = "\(path).bad.\(now.tv_sec).\(now.tv_nsec)"
        if rename(path, aside) == 0 {
            logger.warning("the saved token is damaged (\(reason)); set aside as \(aside), starting without it")
        } else {
            logger.warning(
                "the saved token is damaged (\(reason)) and cannot be set aside (\(String(cString: strerror(errno)))); starting without it")
        }
        return nil
    }

    /// Reads the file without following a link or waiting on a FIFO put there meanwhile; nil (and
    /// `errno`) when it cannot.
    private static func read(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while bytes.count <= maximumBytes {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += chunk.prefix(count)
            } else if count == 0 || errno == EAGAIN {
                break
            } else if errno != EINTR {
                return nil
            }
        }
        return bytes
    }
}

/// A state directory that cannot be looked into at all: the daemon cannot start (exit 71).
package struct StateStoreFailure: Error, Sendable, CustomStringConvertible {
    package let message: String

    package init(_ message: String) {
        self.message = message
    }

    package var description: String { message }
}
