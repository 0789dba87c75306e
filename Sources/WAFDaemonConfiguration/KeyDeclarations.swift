import Logging
import WAFDelivery
import WAFTokenCore

/// How `Keys` declares a key of each kind: the spec, and how the code reads its checked value.
extension Keys {
    // MARK: Declarations

    package static func provider(_ key: WAFConfigurationKey) -> KeySpec {
        let defaults: [WAFConfigurationKey: String] = [
            .applicationIntegrationUrl: "required", .domainName: "required", .backgroundRefreshEnabled: "true",
            .maxErrorTokenRefreshDelayMsec: "5000", .maxRetryCount: "5 with background refresh, else 3",
            .setTokenCookie: "true", .tokenCookiePath: "/", .tokenRefreshDelaySec: "300 (ranges: current: 88)", .ranges: "seed",
        ]
        return KeySpec(
            name: key.rawValue, kind: .provider(key), defaultValue: nil, defaultDescription: defaults[key], help: key.help,
            appliesOnReload: true, scope: .inherited)
    }

    package static func path(
        _ name: String, kind: KeySpec.Kind = .absolutePath, default value: String, help: String, reload: Bool = true
    ) -> SettingKey<String> {
        SettingKey(spec: .init(name: name, kind: kind, defaultValue: value, defaultDescription: nil, help: help, appliesOnReload: reload)) {
            if case .text(let text)? = $0 { text } else { value }
        }
    }

    /// A TCP address on any interface; unset unless given.
    static func tcpAddress(_ name: String, help: String) -> SettingKey<TCPAddress?> {
        SettingKey(spec: .init(name: name, kind: .tcpAddress, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: false)) {
            if case .text(let text)? = $0 { TCPAddress(text) } else { nil }
        }
    }

    /// A loopback TCP address; unset unless given.
    static func loopbackAddress(_ name: String, help: String) -> SettingKey<TCPAddress?> {
        SettingKey(spec: .init(name: name, kind: .loopbackAddress, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: false)) {
            if case .text(let text)? = $0 { TCPAddress(text) } else { nil }
        }
    }

    /// A group, by name or id; unset unless given.
    static func optionalGroup(_ name: String, default description: String, help: String, scope: KeySpec.Scope) -> SettingKey<String?> {
        SettingKey(
            spec: .init(
                name: name, kind: .groupName, defaultValue: nil, defaultDescription: description, help: help, appliesOnReload: true, scope: scope)
        ) {
            if case .text(let text)? = $0 { text } else { nil }
        }
    }

    package static func optionalPath(
        _ name: String, default description: String? = nil, help: String, scope: KeySpec.Scope = .daemon
    ) -> SettingKey<String?> {
        SettingKey(
            spec: .init(
                name: name, kind: .absolutePath, defaultValue: nil, defaultDescription: description, help: help, appliesOnReload: true, scope: scope)
        ) {
            if case .text(let text)? = $0 { text } else { nil }
        }
    }

    package static func mode(_ name: String, default value: String, help: String, reload: Bool = true) -> SettingKey<UInt16> {
        SettingKey(spec: .init(name: name, kind: .octalMode, defaultValue: value, defaultDescription: nil, help: help, appliesOnReload: reload)) {
            if case .mode(let mode)? = $0 { mode } else { UInt16(value, radix: 8)! }
        }
    }

    package static func optionalMode(_ name: String, default description: String, help: String) -> SettingKey<UInt16?> {
        SettingKey(
            spec: .init(
                name: name, kind: .octalMode, defaultValue: nil, defaultDescription: description, help: help, appliesOnReload: true,
                scope: .perProvider)
        ) {
            if case .mode(let mode)? = $0 { mode } else { nil }
        }
    }

    /// A list whose absence means something else than an empty list (another key's value).
    package static func optionalList(_ name: String, default description: String, help: String, scope: KeySpec.Scope) -> SettingKey<[String]?> {
        SettingKey(
            spec: .init(name: name, kind: .list, defaultValue: nil, defaultDescription: description, help: help, appliesOnReload: true, scope: scope)
        ) {
            if case .list(let items)? = $0 { items } else { nil }
        }
    }

    package static func listenAddress(_ name: String, help: String) -> SettingKey<ListenAddress?> {
        SettingKey(
            spec: .init(
                name: name, kind: .listenAddress, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: true, scope: .perProvider)
        ) {
            if case .text(let text)? = $0 { ListenAddress(text) } else { nil }
        }
    }

    package static func url(_ name: String, help: String) -> SettingKey<String?> {
        SettingKey(
            spec: .init(name: name, kind: .url, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: true, scope: .perProvider)
        ) {
            if case .text(let text)? = $0 { text } else { nil }
        }
    }

    package static func list(_ name: String, help: String) -> SettingKey<[String]> {
        SettingKey(spec: .init(name: name, kind: .list, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: true)) {
            if case .list(let items)? = $0 { items } else { [] }
        }
    }

    package static func integer(
        _ name: String, _ range: ClosedRange<Int>, default value: Int, help: String, reload: Bool = true, scope: KeySpec.Scope = .daemon
    ) -> SettingKey<Int> {
        SettingKey(
            spec: .init(
                name: name, kind: .integer(range), defaultValue: String(value), defaultDescription: nil, help: help, appliesOnReload: reload,
                scope: scope)
        ) {
            if case .int(let number)? = $0 { number } else { value }
        }
    }

    package static func flag(
        _ name: String, default value: Bool, help: String, reload: Bool = true, scope: KeySpec.Scope = .daemon
    )
        -> SettingKey<Bool>
    {
        SettingKey(
            spec: .init(
                name: name, kind: .bool, defaultValue: String(value), defaultDescription: nil, help: help, appliesOnReload: reload, scope: scope)
        ) {
            if case .bool(let flag)? = $0 { flag } else { value }
        }
    }

    /// Delivery actions (`sinks.onToken`); unset unless given, a provider's own else the top level's.
    static func actions(_ name: String, help: String) -> SettingKey<[DeliveryAction]?> {
        SettingKey(
            spec: .init(name: name, kind: .actions, defaultValue: nil, defaultDescription: nil, help: help, appliesOnReload: true, scope: .inherited)
        ) {
            if case .actions(let actions)? = $0 { actions } else { nil }
        }
    }

    package static func choice(
        _ name: String, _ values: [String], default value: String, help: String, scope: KeySpec.Scope = .daemon
    ) -> SettingKey<String> {
        SettingKey(
            spec: .init(
                name: name, kind: .choice(values), defaultValue: value, defaultDescription: nil, help: help, appliesOnReload: true, scope: scope)
        ) {
            if case .text(let text)? = $0 { text } else { value }
        }
    }

    package static func choice<Value: RawRepresentable & CaseIterable & Sendable>(_ name: String, _ value: Value, help: String) -> SettingKey<Value>
    where Value.RawValue == String {
        let spec = KeySpec(
            name: name, kind: .choice(Value.allCases.map(\.rawValue)), defaultValue: value.rawValue, defaultDescription: nil, help: help,
            appliesOnReload: true)
        return SettingKey(spec: spec) {
            if case .text(let text)? = $0, let parsed = Value(rawValue: text) { parsed } else { value }
        }
    }
}
