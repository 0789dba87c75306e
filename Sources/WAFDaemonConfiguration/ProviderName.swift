/// A provider's name under `providers:`: `[a-z0-9][a-z0-9-]{0,31}`, so that it is the same in a
/// file, an option, an environment variable (upper-cased, `-` as `_`), a query and a file name.
public enum ProviderName {
    package static let allowed = "a name of 1 to 32 characters: lower-case letters, digits and -, not starting with -"

    public static func isValid(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...32).contains(bytes.count), let first = bytes.first, isLetterOrDigit(first) else { return false }
        return bytes.allSatisfy { isLetterOrDigit($0) || $0 == UInt8(ascii: "-") }
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// The providers' keys set in the environment (`WAF_TOKEND_PROVIDERS_<NAME>_<KEY>`), by name
    /// and key. A variable's key is the longest key suffix it ends in, the name what comes before
    /// (`_` as `-`, lower-cased): names hold no `_`, so the split is never ambiguous.
    package static func environmentValues(_ environment: [String: String]) -> [String: [String: (text: String, variable: String)]] {
        let prefix = "WAF_TOKEND_PROVIDERS_"
        guard environment.keys.contains(where: { $0.hasPrefix(prefix) }) else { return [:] }
        let suffixes = Keys.all.filter(\.perProvider).map { ("_" + $0.environmentSuffix, $0.name) }.sorted { $0.0.count > $1.0.count }
        var values: [String: [String: (text: String, variable: String)]] = [:]
        for (variable, text) in environment where variable.hasPrefix(prefix) && !text.isEmpty {
            let rest = variable.dropFirst(prefix.count)
            guard let (suffix, key) = suffixes.first(where: { rest.hasSuffix($0.0) && rest.count > $0.0.count }) else { continue }
            let name = rest.dropLast(suffix.count).lowercased().replacing("_", with: "-")
            values[name, default: [:]][key] = (text, variable)
        }
        return values
    }

    /// The variables under `WAF_TOKEND_PROVIDERS_` that name no provider key: a typo, refused.
    package static func unknownVariables(_ environment: [String: String]) -> [String] {
        let known = Set(environmentValues(environment).flatMap { $0.value.values.map(\.variable) })
        return environment.keys.filter { $0.hasPrefix("WAF_TOKEND_PROVIDERS_") && !known.contains($0) && !(environment[$0]?.isEmpty ?? true) }
            .sorted()
    }
}
