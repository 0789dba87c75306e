import WAFDelivery
import WAFTokenCore

/// One configuration key, declared once in `Keys`: the declaration drives the loader, the
/// command-line options, `--help`, the man page, `--check-config` and the reference in docs/configuration.md.
/// Its scope says where it may be given: at the top level, in a provider's entry under
/// `providers:`, or both; the same declaration serves every place (there is no second table).
public struct KeySpec: Sendable, Hashable {
    /// Where a key is given, and whether a provider takes the top-level value.
    public enum Scope: Sendable, Hashable {
        /// The daemon's, shared by every provider: the top level only.
        case daemon
        /// An SDK key: at the top level (the `default` provider's, and every provider's fallback)
        /// or in a provider's entry.
        case inherited
        /// Each provider's own, never taken from another: at the top level the `default` provider's.
        case perProvider
        /// In a provider's entry only.
        case providerOnly
    }

    public enum Kind: Sendable, Hashable {
        /// One of the SDK's keys, checked by `WAFConfiguration` (CFG-1…10).
        case provider(WAFConfigurationKey)
        case choice([String])
        case absolutePath
        /// An absolute path a Unix socket address can hold (`ListenAddress.maximumPathBytes`).
        case socketPath
        /// An octal file mode such as "0660".
        case octalMode
        /// User or group names or numeric ids.
        case list
        case bool
        case integer(ClosedRange<Int>)
        /// A Unix socket path, or a loopback address with a port.
        case listenAddress
        /// An absolute URL.
        case url
        /// A group name or a numeric gid.
        case groupName
        /// A loopback address with a port (a TCP listener only this host reaches).
        case loopbackAddress
        /// An address with a port, on any interface (a listener that never carries a token).
        case tcpAddress
        /// A list of delivery actions (`sinks.onToken`): signal, reload, run.
        case actions
        /// `direct`, or an `http://HOST:PORT` forward proxy (`egress.proxy`).
        case egressProxy
    }

    /// The dotted name, as in the file: `socket.path`.
    public let name: String
    public let kind: Kind
    /// The default as written in the file; nil when the key is unset unless given.
    public let defaultValue: String?
    /// The default in words, when it is not a plain value ("5 with background refresh, else 3").
    public let defaultDescription: String?
    public let help: String
    /// Whether a reload (SIGHUP) applies it; otherwise it takes effect at the next start.
    public let appliesOnReload: Bool
    public var scope: Scope = .daemon

    /// Whether a provider's entry may give it.
    public var perProvider: Bool { scope != .daemon }
    /// Whether the top level may give it.
    public var topLevel: Bool { scope != .providerOnly }

    /// A daemon key that may be left unset (a path, a list): empty in the file means "not set".
    package var isOptional: Bool {
        if case .provider = kind { return false }
        return defaultValue == nil
    }

    /// `WAF_TOKEND_` + the name in upper snake case: `WAF_TOKEND_SOCKET_PATH`.
    public var environmentName: String { "WAF_TOKEND_" + environmentSuffix }

    /// The name in upper snake case: `SOCKET_PATH`.
    package var environmentSuffix: String { words.map { $0.uppercased() }.joined(separator: "_") }

    /// For a provider: `WAF_TOKEND_PROVIDERS_PAY_API_DOMAIN_NAME` (the name upper-cased, `-` as `_`).
    public func environmentName(provider: String) -> String {
        "WAF_TOKEND_PROVIDERS_" + provider.uppercased().replacing("-", with: "_") + "_" + environmentSuffix
    }

    /// For a provider: `--providers.pay-api.domainName` (the key as the file writes it).
    public func optionName(provider: String) -> String { "--providers.\(provider).\(name)" }

    /// `--` + the name in kebab case: `--socket-path`.
    public var optionName: String { "--" + words.joined(separator: "-") }

    /// Whether `option` is `optionName`, compared byte by byte as `kebab` makes it: the command
    /// line is read at every start, and deriving each of sixty keys' names to look up a few
    /// options was 0.24 ms of a start's CPU in a profile (docs/performance.md).
    public func isOption(_ option: String) -> Bool {
        var given = option.utf8.makeIterator()
        guard given.next() == UInt8(ascii: "-"), given.next() == UInt8(ascii: "-") else { return false }
        return kebab { given.next() == $0 } && given.next() == nil
    }

    /// The name as one camel-case word: `socketPath` (the option's property name).
    package var propertyName: String {
        words.enumerated().map { $0.offset == 0 ? $0.element : $0.element.prefix(1).uppercased() + $0.element.dropFirst() }.joined()
    }

    /// The section of a dotted name (`socket`), nil at the top level.
    package var section: String? { name.contains(".") ? String(name.prefix { $0 != "." }) : nil }

    /// What the key accepts, in words an operator can act on.
    public var allowed: String {
        switch kind {
        case .provider(let key): key.allowed()
        case .choice(let values): "one of " + values.joined(separator: ", ")
        case .absolutePath: "an absolute path"
        case .socketPath: "an absolute path of at most \(ListenAddress.maximumPathBytes) bytes (what a Unix socket address holds)"
        case .octalMode: "an octal file mode such as \"0660\" (0000…0777)"
        case .list: "a list of user or group names or numeric ids"
        case .bool: "true or false"
        case .integer(let range): "an integer \(range.lowerBound)…\(range.upperBound)"
        case .listenAddress:
            "a Unix socket path of at most \(ListenAddress.maximumPathBytes) bytes, or a loopback address with a port (127.0.0.1:8089, [::1]:8089)"
        case .url: "an absolute https URL (http only to a loopback host)"
        case .groupName: "a group name or a numeric gid"
        case .loopbackAddress: "a loopback address with a port (127.0.0.1:8090, [::1]:8090)"
        case .tcpAddress: "an address with a port (0.0.0.0:9464, 127.0.0.1:9464, [::]:9464)"
        case .actions:
            "a list of actions, each {signal: {pidFile: PATH, name: HUP}}, {reload: UNIT} or {run: [PROGRAM, ARGS...]} (as YAML, in a variable or an option too)"
        case .egressProxy: "direct, or http://HOST:PORT of a forward proxy (no credentials in it: egress.proxyCredentialsFile)"
        }
    }

    /// The words of the dotted camel-case name: `tokenService.caFile` → token, service, ca, file.
    private var words: [String] {
        var bytes: [UInt8] = []
        _ = kebab {
            bytes.append($0)
            return true
        }
        return bytes.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The name in kebab case (`token-service-ca-file`), a byte at a time to `byte`, until it
    /// returns false (then false). A dot, and a capital after a lowercase letter, start a word.
    /// Names are ASCII (the table's test says so), so this works on bytes: with `Character`'s
    /// Unicode properties it was a measurable part of start-up, where every name is derived.
    private func kebab(_ byte: (UInt8) -> Bool) -> Bool {
        // The last byte of the word so far, 0 at a word's start.
        var last: UInt8 = 0
        for next in name.utf8 {
            if next == UInt8(ascii: ".") {
                guard byte(UInt8(ascii: "-")) else { return false }
                last = 0
            } else if next >= UInt8(ascii: "A"), next <= UInt8(ascii: "Z") {
                if last >= UInt8(ascii: "a"), last <= UInt8(ascii: "z") {
                    guard byte(UInt8(ascii: "-")) else { return false }
                }
                last = next + 32
                guard byte(last) else { return false }
            } else {
                last = next
                guard byte(next) else { return false }
            }
        }
        return true
    }
}

/// A checked value of a daemon key.
public enum CheckedValue: Sendable, Hashable {
    case text(String)
    case int(Int)
    case bool(Bool)
    case list([String])
    case mode(UInt16)
    case actions([DeliveryAction])
}

/// A key with the type the code reads it as: `configuration[Keys.socketPath]` is a `String`.
public struct SettingKey<Value: Sendable>: Sendable {
    public let spec: KeySpec
    package let read: @Sendable (CheckedValue?) -> Value
}
