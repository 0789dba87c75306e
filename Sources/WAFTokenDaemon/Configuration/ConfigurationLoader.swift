import Configuration
import SystemPackage
import WAFTokenCore
import Yams

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where configuration comes from, in order of precedence: command line, environment, file,
/// defaults (SIDECAR.md).
public struct ConfigurationSources: Sendable {
    public static let defaultFile = "/etc/waf-tokend/waf-tokend.yaml"

    /// Raw values from command-line options, by configuration key.
    public var commandLine: [String: String]
    public var environment: [String: String]
    /// A file given with `--config` must exist; the default one may be absent.
    public var file: String?
    /// Values below everything else that the daemon supplies itself (demo mode).
    public var fallbacks: [String: String]

    public init(commandLine: [String: String] = [:], environment: [String: String] = [:], file: String? = nil, fallbacks: [String: String] = [:]) {
        self.commandLine = commandLine
        self.environment = environment
        self.file = file
        self.fallbacks = fallbacks
    }

    public var filePath: String { file ?? Self.defaultFile }
}

/// Reads and checks the whole configuration through swift-configuration's providers.
///
/// Values are read as text (or lists of text) and typed here against the key tables, so that a
/// wrong type or an out-of-range value is refused with key, value, range and origin (CFG-9)
/// instead of quietly becoming a default, and every problem is reported at once.
public enum ConfigurationLoader {
    public static func load(_ sources: ConfigurationSources) async -> Result<DaemonConfiguration, WAFConfigurationError> {
        let chain: SourceChain
        var issues: [WAFConfigurationIssue] = []
        do {
            chain = try await makeChain(sources)
            issues += try unknownFileKeys(in: sources.filePath)
        } catch {
            return .failure(WAFConfigurationError(issues: [WAFConfigurationIssue(
                key: "--config", value: sources.filePath.debugDescription, problem: "cannot be read: \(error)",
                allowed: "a readable YAML file")]))
        }

        var settings: [String: WAFSettingValue] = [:]
        var origins: [String: String] = [:]
        for key in WAFConfigurationKey.allCases {
            switch chain.raw(key.rawValue, list: false) {
            case .success((.text(let text), let origin)?):
                settings[key.rawValue] = .text(text)
                origins[key.rawValue] = origin
            case .success:
                break
            case .failure(let issue):
                issues.append(issue)
            }
        }
        var provider: WAFConfiguration?
        do {
            provider = try WAFConfiguration(settings: settings)
        } catch {
            issues += error.issues.map { issue in
                guard let origin = origins[issue.key] else { return issue }
                return WAFConfigurationIssue(key: issue.key, value: issue.value, problem: "\(issue.problem) (from \(origin))", allowed: issue.allowed)
            }
        }

        var values = DaemonValues(environment: sources.environment)
        for key in DaemonKey.allCases {
            values.read(key, from: chain, into: &issues)
        }
        guard let provider, issues.isEmpty else {
            return .failure(WAFConfigurationError(issues: issues))
        }
        return .success(values.configuration(provider: provider))
    }

    // MARK: Providers

    private static func makeChain(_ sources: ConfigurationSources) async throws -> SourceChain {
        func inMemory(_ name: String, _ raw: [String: String]) -> InMemoryProvider {
            var values: [AbsoluteConfigKey: ConfigValue] = [:]
            for (key, text) in raw {
                values[AbsoluteConfigKey(key.split(separator: ".").map(String.init))] = ConfigValue(.string(text), isSecret: false)
            }
            return InMemoryProvider(name: name, values: values)
        }
        let path = sources.filePath
        // An empty file, or /dev/null, holds no settings (YAML's empty document is no mapping).
        let file: any ConfigProvider = isEmpty(path)
            ? InMemoryProvider(name: path, values: [:])
            : try await FileProvider<YAMLSnapshot>(filePath: FilePath(path), allowMissing: sources.file == nil)
        return SourceChain(sources: [
            .init(name: "the command line", provider: inMemory("command line", sources.commandLine)) { key, _ in DaemonKey.optionName(key) },
            .init(
                name: "the environment",
                provider: EnvironmentVariablesProvider(environmentVariables: sources.environment).prefixKeys(with: ["wafTokend"])
            ) { _, encoded in encoded },
            .init(name: path, provider: file) { key, _ in "\(key) in \(path)" },
            .init(name: "demo mode", provider: inMemory("demo mode", sources.fallbacks)) { _, _ in "demo mode" },
        ])
    }

    private static func isEmpty(_ path: String) -> Bool {
        var info = stat()
        guard stat(path, &info) == 0 else { return false }
        return info.st_mode & S_IFMT == S_IFCHR || (info.st_mode & S_IFMT == S_IFREG && info.st_size == 0)
    }

    /// A key in the file that no table knows is almost always a typo: refuse it rather than let
    /// its default apply unnoticed.
    private static func unknownFileKeys(in path: String) throws -> [WAFConfigurationIssue] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            case .mapping(let root)? = try Yams.compose(yaml: text)
        else { return [] }
        let known = Set(WAFConfigurationKey.allCases.map(\.rawValue) + DaemonKey.allCases.map(\.rawValue))
        let sections = Set(known.filter { $0.contains(".") }.map { String($0.prefix { $0 != "." }) })
        var issues: [WAFConfigurationIssue] = []
        for (name, value) in root {
            guard let top = name.string else { continue }
            if sections.contains(top) {
                // A section with every key commented out is empty (null), not a mistake.
                guard case .mapping(let children) = value else { continue }
                for child in children.keys.compactMap(\.string) where !known.contains("\(top).\(child)") {
                    issues.append(unknownKey("\(top).\(child)", path: path, known: known.filter { $0.hasPrefix(top + ".") }))
                }
            } else if !known.contains(top) {
                issues.append(unknownKey(top, path: path, known: known.filter { !$0.contains(".") }.union(sections)))
            }
        }
        return issues.sorted { $0.key < $1.key }
    }

    private static func unknownKey(_ key: String, path: String, known: Set<String>) -> WAFConfigurationIssue {
        WAFConfigurationIssue(key: key, value: nil, problem: "is not a configuration key (in \(path))", allowed: known.sorted().joined(separator: ", "))
    }

    /// "alice, 1000,bob" → alice, 1000, bob (user and group names hold no whitespace).
    static func splitList(_ text: String) -> [String] {
        text.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }.filter { !$0.isEmpty }
    }
}
