import WAFTokenCore

/// One provider as the daemon runs it: its name, its SDK configuration (its own keys, else the
/// top level's), and its own `sinks.tokenFile`, `proxy.*`, `allowedUsers` and `allowedGroups`.
public struct ProviderConfiguration: Sendable, Equatable {
    public let name: String
    public let configuration: WAFConfiguration
    /// Its per-provider keys, checked; unset keys read as their defaults.
    package let values: [String: CheckedValue]

    public subscript<Value>(_ key: SettingKey<Value>) -> Value {
        key.read(values[key.spec.name])
    }

    public var identity: WAFTokenIdentity { configuration.identity }
    public var domainName: String { configuration.domainName }
    public var isDefault: Bool { name == WAFProviderName.defaultName }

    /// The keys this provider's entry writes in the effective configuration: every SDK key with the
    /// value in force, then its own keys that are set.
    package var effectiveSettings: [(key: String, value: String)] {
        Keys.all.filter(\.perProvider).compactMap { spec in
            if case .provider(let key) = spec.kind {
                return configuration.settings[key.rawValue].map { (spec.name, DaemonConfiguration.render($0)) }
            }
            return values[spec.name].map { (spec.name, DaemonConfiguration.render($0)) }
        }
    }
}
