import Configuration
import WAFTokenCore

/// The configuration providers in order of precedence. The first that holds a key decides its
/// value; a key it holds with the wrong shape (a list for a single value) is an error, not a miss.
struct SourceChain {
    struct Source {
        let name: String
        let provider: any ConfigProvider
        /// How to name the place a value came from: the option, the variable, the file.
        let describe: (_ key: String, _ encodedKey: String) -> String
    }

    enum Raw: Equatable {
        case text(String)
        case list([String])
    }

    let sources: [Source]

    /// The key's value and where it came from, nil when no source holds it.
    func raw(_ key: String, list: Bool) -> Result<(value: Raw, origin: String)?, WAFConfigurationIssue> {
        let absolute = AbsoluteConfigKey(key.split(separator: ".").map(String.init))
        for source in sources {
            do {
                if list {
                    if let found = try lookupList(source, absolute) { return .success(found) }
                } else {
                    let result = try source.provider.value(forKey: absolute, type: .string)
                    if case .string(let text)? = result.value?.content, !Self.isUnset(text) {
                        return .success((.text(text), source.describe(key, result.encodedKey)))
                    }
                }
            } catch {
                return .failure(WAFConfigurationIssue(
                    key: key, value: nil, problem: "is not a single value (in \(source.name))", allowed: "a single value"))
            }
        }
        return .success(nil)
    }

    /// YAML's null (`key:`, `~`, `null`) and an empty variable mean "not set", here as everywhere.
    static func isUnset(_ text: String) -> Bool {
        ["", "~", "null", "Null", "NULL"].contains(text)
    }

    /// A list, or a single value standing for a list of one (or comma-separated).
    private func lookupList(_ source: Source, _ key: AbsoluteConfigKey) throws -> (value: Raw, origin: String)? {
        let name = key.components.joined(separator: ".")
        if let result = try? source.provider.value(forKey: key, type: .stringArray),
            case .stringArray(let items)? = result.value?.content
        {
            return (.list(items.flatMap(ConfigurationLoader.splitList)), source.describe(name, result.encodedKey))
        }
        let result = try source.provider.value(forKey: key, type: .string)
        guard case .string(let text)? = result.value?.content, !Self.isUnset(text) else { return nil }
        return (.list(ConfigurationLoader.splitList(text)), source.describe(name, result.encodedKey))
    }
}
