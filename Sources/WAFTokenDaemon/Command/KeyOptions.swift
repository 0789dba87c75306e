import ArgumentParser
import WAFDaemonConfiguration

/// One command-line option per configuration key (`--socket-path`, `--domain-name`, …), made from
/// the key table. ArgumentParser finds a command's options by reflection; the mirror below shows
/// it the table's keys, so `--help`, the man page and shell completions list them like any option.
public struct KeyOptions: ParsableArguments, CustomReflectable {
    /// The options given, by key name.
    public private(set) var values: [String: String] = [:]

    public init() {}

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: PropertyName.self)
        for spec in Keys.all where spec.topLevel {
            let option = try container.decode(Option<String?>.self, forKey: PropertyName(stringValue: spec.propertyName))
            if let value = option.wrappedValue { values[spec.name] = value }
        }
    }

    public var customMirror: Mirror {
        Mirror(
            self,
            children: Keys.all.filter(\.topLevel).map { spec in
                (label: "_" + spec.propertyName, value: Option<String?>(help: ArgumentHelp(spec.help, valueName: valueName(spec))) as Any)
            })
    }

    private func valueName(_ spec: KeySpec) -> String {
        switch spec.kind {
        case .bool: "true|false"
        case .integer: "n"
        case .choice(let values): values.joined(separator: "|")
        case .absolutePath, .socketPath: "path"
        case .octalMode: "mode"
        case .list: "names"
        case .provider, .listenAddress, .url: "value"
        case .groupName: "group"
        case .loopbackAddress, .tcpAddress: "address:port"
        case .actions: "yaml"
        case .egressProxy: "direct|http://host:port"
        }
    }

    private struct PropertyName: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}
