import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// Reads the YAML file through a plain file descriptor (a regular file, or a pipe as
/// `--config <(generate)` and systemd credentials give), in bounded time and memory, and checks
/// its shape against the key table: every key known, every section a map, every value a single
/// value or, for lists, a list of them; under `providers:`, a map of names to such entries. What it
/// returns is keyed by dotted name.
struct ConfigurationFile {
    static let maximumBytes = 1 << 20
    /// A pipe must deliver the whole file within this time.
    static let readTimeoutMilliseconds: Int32 = 10_000

    let path: String
    private(set) var values: [String: YAMLNode] = [:]
    /// The entries under `providers:`, by provider name, each keyed by dotted name.
    private(set) var providers: [String: [String: YAMLNode]] = [:]
    private(set) var issues: [WAFConfigurationIssue] = []
    /// The file could not be used at all: what else is missing says nothing then.
    private(set) var unusable = false

    /// Reads `path`; a missing file is an error only when `required` (given with `--config`).
    init(path: String, required: Bool) {
        self.path = path
        let bytes: [UInt8]
        switch Self.readBytes(path) {
        case .success(let read): bytes = read
        case .failure(.missing) where !required: return
        case .failure(let problem):
            issues.append(Self.fileIssue(path, problem.description))
            unusable = true
            return
        }
        parse(bytes)
    }

    /// The file's contents as given (fuzzing and tests), under the name `path`.
    init(path: String, bytes: [UInt8]) {
        self.path = path
        parse(bytes)
    }

    private mutating func parse(_ bytes: [UInt8]) {
        do throws(YAMLDocument.ParseError) {
            guard let root = try YAMLDocument.parse(bytes) else { return }
            walk(root)
        } catch {
            issues.append(Self.fileIssue(path, error.description))
            unusable = true
        }
    }

    private static func fileIssue(_ path: String, _ problem: String) -> WAFConfigurationIssue {
        WAFConfigurationIssue(
            key: "--config", value: path.debugDescription, problem: "cannot be used: \(problem)", allowed: "a readable YAML file of at most 1 MiB")
    }

    // MARK: Shape

    private mutating func walk(_ root: YAMLNode) {
        guard case .mapping(let pairs) = root else {
            issues.append(Self.fileIssue(path, "its top level is \(root.kind), not a map of keys"))
            unusable = true
            return
        }
        let topLevel = Keys.all.filter(\.topLevel)
        entries(pairs, keys: topLevel, prefix: "") { this, spec, node in
            var values = this.values
            this.record(spec, node, into: &values, as: spec.name)
            this.values = values
        }
    }

    /// The keys of one map (the top level, or a provider's entry), sections opened, each known
    /// key handed to `take`. At the top level, `providers` holds the providers' entries.
    private mutating func entries(
        _ pairs: [YAMLPair], keys: [KeySpec], prefix: String, _ take: (inout ConfigurationFile, KeySpec, YAMLNode) -> Void
    ) {
        let byName = Dictionary(uniqueKeysWithValues: keys.map { ($0.name, $0) })
        let sections = Set(keys.compactMap(\.section))
        let known = keys.map { $0.section ?? $0.name } + (prefix.isEmpty ? ["providers"] : [])
        for pair in pairs {
            guard case .scalar(let key) = pair.key else {
                unknown(prefix + "(\(pair.key.kind) as a key)", known: known)
                continue
            }
            let name = Self.printable(key.text)
            if let spec = byName[name] {
                take(&self, spec, pair.value)
            } else if sections.contains(name) {
                section(name, pair.value, keys: keys, prefix: prefix, take)
            } else if prefix.isEmpty, name == "providers" {
                providerEntries(pair.value)
            } else {
                unknown(prefix + name, known: known)
            }
        }
    }

    private mutating func section(
        _ name: String, _ node: YAMLNode, keys: [KeySpec], prefix: String, _ take: (inout ConfigurationFile, KeySpec, YAMLNode) -> Void
    ) {
        let inSection = keys.filter { $0.section == name }
        switch node {
        case .mapping(let pairs):
            for pair in pairs {
                guard case .scalar(let key) = pair.key else { continue }
                let dotted = "\(name).\(Self.printable(key.text))"
                if let spec = inSection.first(where: { $0.name == dotted }) {
                    take(&self, spec, pair.value)
                } else {
                    unknown(prefix + dotted, known: inSection.map(\.name))
                }
            }
        case .scalar(let scalar) where scalar.type == .null:
            break  // a section with every key commented out
        default:
            issues.append(
                WAFConfigurationIssue(
                    key: prefix + name, value: nil, problem: "is \(node.kind), not a section (in \(path))",
                    allowed: "a map of " + inSection.map(\.name).joined(separator: ", ")))
        }
    }

    /// `providers:`: names to entries, each a map of the keys a provider may have.
    private mutating func providerEntries(_ node: YAMLNode) {
        let keys = Keys.all.filter(\.perProvider)
        let allowedKeys = "a map of " + Set(keys.map { $0.section ?? $0.name }).sorted().joined(separator: ", ")
        switch node {
        case .mapping(let pairs):
            for pair in pairs {
                guard case .scalar(let key) = pair.key, ProviderName.isValid(key.text) else {
                    let shown = if case .scalar(let key) = pair.key { Self.printable(key.text) } else { "(\(pair.key.kind) as a name)" }
                    issues.append(
                        WAFConfigurationIssue(
                            key: "providers." + shown, value: nil, problem: "is not a provider name (in \(path))", allowed: ProviderName.allowed))
                    continue
                }
                let name = key.text
                if providers[name] != nil {
                    issues.append(
                        WAFConfigurationIssue(key: "providers." + name, value: nil, problem: "is given twice (in \(path))", allowed: allowedKeys))
                }
                let prefix = "providers.\(name)."
                switch pair.value {
                case .mapping(let entry):
                    providers[name] = [:]
                    entries(entry, keys: keys, prefix: prefix) { this, spec, node in
                        var values = this.providers[name] ?? [:]
                        this.record(spec, node, into: &values, as: prefix + spec.name)
                        this.providers[name] = values
                    }
                default:
                    issues.append(
                        WAFConfigurationIssue(
                            key: "providers." + name, value: nil, problem: "is \(pair.value.kind), not a map of keys (in \(path))",
                            allowed: allowedKeys))
                }
            }
        case .scalar(let scalar) where scalar.type == .null:
            break
        default:
            issues.append(
                WAFConfigurationIssue(
                    key: "providers", value: nil, problem: "is \(node.kind), not a map of names to providers (in \(path))",
                    allowed: "a map of provider names to " + allowedKeys))
        }
    }

    private mutating func record(_ spec: KeySpec, _ node: YAMLNode, into values: inout [String: YAMLNode], as shown: String) {
        if values[spec.name] != nil {
            issues.append(WAFConfigurationIssue(key: shown, value: nil, problem: "is given twice (in \(path))", allowed: spec.allowed))
        }
        values[spec.name] = node
    }

    /// A key as an error message may show it: a name with anything but printable ASCII quoted
    /// and escaped, so that every problem stays one line.
    static func printable(_ key: String) -> String {
        key.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } && !key.isEmpty ? key : key.debugDescription
    }

    private mutating func unknown(_ name: String, known: [String]) {
        // A key no table knows is almost always a typo: refuse it rather than let a default apply.
        let list = Array(Set(known)).sorted().joined(separator: ", ")
        issues.append(WAFConfigurationIssue(key: name, value: nil, problem: "is not a configuration key (in \(path))", allowed: list))
    }

    // MARK: Reading

    enum ReadProblem: Error, CustomStringConvertible {
        case missing
        case system(String)
        case notAFile(String)
        case tooLarge
        case timedOut

        var description: String {
            switch self {
            case .missing: "it does not exist"
            case .system(let text): text
            case .notAFile(let kind): "it is \(kind), not a file"
            case .tooLarge: "it is larger than 1 MiB"
            case .timedOut: "its end did not arrive within 10 s"
            }
        }
    }

    /// The file's bytes: at most `maximumBytes`, a pipe within `readTimeoutMilliseconds`.
    static func readBytes(_ path: String) -> Result<[UInt8], ReadProblem> {
        // Non-blocking open: a FIFO without a writer must not hang the start-up.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else {
            return .failure(errno == ENOENT ? .missing : .system(String(cString: strerror(errno))))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return .failure(.system(String(cString: strerror(errno)))) }
        switch info.st_mode & S_IFMT {
        case S_IFREG, S_IFIFO, S_IFCHR: break
        case S_IFDIR: return .failure(.notAFile("a directory"))
        case S_IFSOCK: return .failure(.notAFile("a socket"))
        default: return .failure(.notAFile("a device"))
        }
        if info.st_mode & S_IFMT == S_IFREG, info.st_size > maximumBytes { return .failure(.tooLarge) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        let deadline = ContinuousClock.now + .milliseconds(Int64(readTimeoutMilliseconds))
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += chunk.prefix(count)
                if bytes.count > maximumBytes { return .failure(.tooLarge) }
            } else if count == 0 {
                // A FIFO that no writer ever opened reads as empty: that is an empty file.
                return .success(bytes)
            } else if errno == EAGAIN {
                let left = deadline - ContinuousClock.now
                guard left > .zero else { return .failure(.timedOut) }
                var wait = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&wait, 1, Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)))
            } else if errno != EINTR {
                return .failure(.system(String(cString: strerror(errno))))
            }
        }
    }
}
