import WAFDelivery
import WAFTokenCore

/// Everything `waf-tokend` runs with, all checked: the providers (the `default` one first, then
/// the others by name), and the daemon's own keys read by their typed key,
/// `configuration[Keys.socketPath]`.
public struct DaemonConfiguration: Sendable {
    public let providers: [ProviderConfiguration]
    /// The SDK keys the top level gives, for the effective configuration.
    package let topLevelSDK: [String: WAFSettingValue]
    package let values: [String: CheckedValue]
    /// The proxy variables of the environment the configuration was read in (`https_proxy`, …),
    /// which decide a provider's egress when `egress.proxy` does not.
    package let proxyEnvironment: [String: String]

    /// The variables an egress is read from when `egress.proxy` is unset.
    package static let proxyVariables = ["https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"]

    package init(
        providers: [ProviderConfiguration], topLevelSDK: [String: WAFSettingValue], values: [String: CheckedValue],
        proxyEnvironment: [String: String] = [:]
    ) {
        self.providers = providers
        self.topLevelSDK = topLevelSDK
        self.values = values
        self.proxyEnvironment = proxyEnvironment
    }

    /// The same configuration with only the provider named `name` (every daemon key kept).
    package func keeping(only name: String) -> DaemonConfiguration {
        DaemonConfiguration(
            providers: providers.filter { $0.name == name }, topLevelSDK: topLevelSDK, values: values, proxyEnvironment: proxyEnvironment)
    }

    /// The provider the top-level identity makes, if the top level has one.
    public var defaultProvider: ProviderConfiguration? { providers.first(where: \.isDefault) }

    /// The first provider's SDK configuration: the `default` one's when the top level has one,
    /// the only one's in a single-provider configuration.
    public var provider: WAFConfiguration { providers[0].configuration }

    public subscript<Value>(_ key: SettingKey<Value>) -> Value {
        key.read(values[key.spec.name])
    }

    /// Whether a source gave `key` (not only its default).
    public func isSet<Value>(_ key: SettingKey<Value>) -> Bool {
        values[key.spec.name] != nil
    }

    /// Every top-level key with its effective value as the file writes it, "" when unset. Nothing
    /// in the configuration is secret: paths, names and numbers only.
    public var effectiveSettings: [(key: String, value: String)] {
        Keys.all.filter(\.topLevel).map { spec in
            if case .provider(let key) = spec.kind {
                let value = defaultProvider?.configuration.settings[key.rawValue] ?? topLevelSDK[key.rawValue]
                return (spec.name, value.map(Self.render) ?? "")
            }
            return (spec.name, values[spec.name].map { Self.render($0) } ?? spec.defaultValue.map { Self.renderDefault($0, spec) } ?? "")
        }
    }

    /// The effective configuration as a YAML document, sections nested, unset keys as comments,
    /// so that it reads back as the same configuration.
    public var effectiveYAML: String {
        var lines: [String] = []
        var section: String?
        for (key, value) in effectiveSettings {
            let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
            if parts.count == 2, section != parts[0] {
                lines.append("\(parts[0]):")
                section = parts[0]
            } else if parts.count == 1 {
                section = nil
            }
            let indent = parts.count == 2 ? "  " : ""
            let name = parts.last!
            lines.append(value.isEmpty ? "\(indent)# \(name): (not set)" : "\(indent)\(name): \(value)")
        }
        // Every other provider with every key in force, its SDK keys written out even where the
        // top level gave them: it reads back as the same providers.
        let named = providers.filter { !$0.isDefault }
        if !named.isEmpty { lines.append("providers:") }
        for provider in named {
            lines.append("  \(provider.name):")
            var section: String?
            for (key, value) in provider.effectiveSettings {
                let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
                if parts.count == 2, section != parts[0] {
                    lines.append("    \(parts[0]):")
                    section = parts[0]
                } else if parts.count == 1 {
                    section = nil
                }
                lines.append((parts.count == 2 ? "      " : "    ") + "\(parts.last!): \(value)")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    package static func render(_ value: WAFSettingValue) -> String {
        switch value {
        case .string(let text), .text(let text): yamlString(text)
        case .int(let number): String(number)
        case .bool(let flag): String(flag)
        case .double(let number): String(number)
        }
    }

    package static func render(_ value: CheckedValue) -> String {
        switch value {
        case .text(let text): yamlString(text)
        case .int(let number): String(number)
        case .bool(let flag): String(flag)
        case .list(let items): items.isEmpty ? "" : "[" + items.map(yamlString).joined(separator: ", ") + "]"
        case .mode(let mode): "\"0" + String(mode, radix: 8) + "\""
        case .actions(let actions): DeliveryActions.render(actions)
        }
    }

    private static func renderDefault(_ text: String, _ spec: KeySpec) -> String {
        if case .octalMode = spec.kind { return "\"\(text)\"" }
        return text
    }

    /// A string as YAML reads it back the same: plain when that is unambiguous (paths, URLs, names),
    /// else double-quoted. A group named `Y]` in a flow list, or a path with `: `, broke the
    /// effective configuration (found by fuzz-config).
    package static func yamlString(_ text: String) -> String {
        let plainFirst = { (c: Unicode.Scalar) in
            ("0"..."9").contains(c) || ("a"..."z").contains(c) || ("A"..."Z").contains(c) || "/_.".unicodeScalars.contains(c)
        }
        let plainRest = { (c: Unicode.Scalar) in plainFirst(c) || "-+@=:%".unicodeScalars.contains(c) }
        let scalars = text.unicodeScalars
        let keyword = ["true", "false", "yes", "no", "on", "off", "null", "y", "n"].contains(text.lowercased())
        if let first = scalars.first, plainFirst(first), scalars.allSatisfy(plainRest), scalars.last != ":", !keyword,
            Double(text) == nil, !text.hasPrefix("0x"), !text.hasPrefix("0o")
        {
            return text
        }
        var quoted = "\""
        for scalar in scalars {
            switch scalar {
            case "\\": quoted += "\\\\"
            case "\"": quoted += "\\\""
            case _
            where scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.properties.generalCategory == .unassigned
                || scalar.properties.generalCategory == .surrogate || scalar.properties.generalCategory == .privateUse
                || scalar.value == 0xFEFF:
                let hex = String(scalar.value, radix: 16)
                quoted += "\\U" + String(repeating: "0", count: 8 - hex.count) + hex
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }
}
