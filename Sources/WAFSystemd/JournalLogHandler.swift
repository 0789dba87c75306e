import CSystemd
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log handler that writes to the journal natively (`sd_journal_sendv`): `MESSAGE`,
/// `PRIORITY`, `SYSLOG_IDENTIFIER`, `CODE_FILE`, `CODE_LINE`, `CODE_FUNC`, and every metadata key
/// as a field of its own (`token.fingerprint` → `TOKEN_FINGERPRINT`), so that
/// `journalctl TOKEN_FINGERPRINT=…` finds what happened to a token.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let identifier: String

    public init(identifier: String) {
        self.identifier = identifier
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = [
            "MESSAGE=\(event.message)",
            "PRIORITY=\(Self.priority(event.level))",
            "SYSLOG_IDENTIFIER=\(identifier)",
            "CODE_FILE=\(event.file)",
            "CODE_LINE=\(event.line)",
            "CODE_FUNC=\(event.function)",
        ]
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) {
            guard let name = Self.fieldName(key) else { continue }
            fields.append("\(name)=\(value)")
        }
        if let error = event.error { fields.append("ERROR=\(error)") }
        Self.send(fields)
    }

    /// syslog severities: trace and debug 7, info 6, notice 5, warning 4, error 3, critical 2.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// A legal journal field name: upper case, `[A-Z0-9_]`, not starting with `_` or a digit (the
    /// journal reserves `_` for trusted fields), at most 64 bytes; nil when nothing is left.
    public static func fieldName(_ key: String) -> String? {
        var name = String(
            key.uppercased().unicodeScalars.map { scalar -> Character in
                (scalar.properties.isUppercase && scalar.isASCII) || ("0"..."9").contains(scalar) ? Character(scalar) : "_"
            })
        while name.first == "_" { name.removeFirst() }
        if let first = name.first, first.isNumber { name = "F_" + name }
        name = String(name.prefix(64))
        return name.isEmpty ? nil : name
    }

    /// Whether stderr is the journal's stream: systemd says so in `JOURNAL_STREAM` (`device:inode`).
    public static func isStandardErrorJournal(environment: [String: String]) -> Bool {
        isStandardErrorJournal(stream: environment["JOURNAL_STREAM"])
    }

    /// The same, from the process's own environment: one variable read, not the whole environment
    /// copied into a dictionary (2 % of a start's CPU, docs/performance.md, "Start-up in detail").
    public static var isStandardErrorJournal: Bool {
        isStandardErrorJournal(stream: getenv("JOURNAL_STREAM").map { String(cString: $0) })
    }

    private static func isStandardErrorJournal(stream: String?) -> Bool {
        guard let stream else { return false }
        var info = stat()
        guard fstat(STDERR_FILENO, &info) == 0 else { return false }
        return stream == "\(info.st_dev):\(info.st_ino)"
    }

    /// One buffer holds every field; the iovecs point at their offsets in it during the call.
    private static func send(_ fields: [String]) {
        var buffer: [UInt8] = []
        var ranges: [Range<Int>] = []
        for field in fields {
            let start = buffer.count
            buffer.append(contentsOf: field.utf8)
            ranges.append(start..<buffer.count)
        }
        buffer.withUnsafeMutableBytes { bytes in
            let vectors = ranges.map { iovec(iov_base: bytes.baseAddress! + $0.lowerBound, iov_len: $0.count) }
            _ = sd_journal_sendv(vectors, Int32(vectors.count))
        }
    }
}
