import WAFTokenCore

/// Checks one key's value as a source gave it against the key's kind (CFG-9). A typed source (the
/// YAML file) must give the right type and shape; text (environment, command line) is read as what
/// the key expects.
enum SettingCheck {
    enum Given {
        case text(String)
        case yaml(YAMLNode)

        var rendered: String {
            switch self {
            case .text(let text): WAFSettingValue.text(text).rendered
            case .yaml(.scalar(let scalar)):
                switch scalar.type {
                case .string: scalar.text.debugDescription
                case .null: "null"
                default: scalar.text
                }
            case .yaml(.sequence): "[…]"
            case .yaml(.mapping): "{…}"
            }
        }
    }

    enum Checked {
        case provider(WAFSettingValue)
        case daemon(CheckedValue)
        case unset
    }

    static func check(_ given: Given, for spec: KeySpec) -> Result<Checked, Problem> {
        if case .provider = spec.kind { return provider(given, spec).map(Checked.provider) }
        if case .list = spec.kind { return list(given).map(Checked.daemon) }
        if case .actions = spec.kind { return DeliveryActions.check(given) }
        let text: String
        switch given {
        case .text(let value):
            text = value
        case .yaml(.scalar(let scalar)):
            if scalar.type == .null {
                return spec.isOptional
                    ? .success(.unset) : .failure(Problem("is null; leave the key out for its default (\(spec.defaultValue ?? "none"))"))
            }
            if let wrong = wrongType(scalar, for: spec.kind) { return .failure(Problem(wrong)) }
            text = scalar.text
        case .yaml(let node):
            return .failure(Problem("is \(node.kind), not a single value"))
        }
        return daemon(text, spec.kind).map(Checked.daemon)
    }

    struct Problem: Error {
        let text: String
        init(_ text: String) { self.text = text }
    }

    // MARK: Kinds

    /// A YAML scalar of the wrong type for `kind`: "is a number, not a boolean".
    private static func wrongType(_ scalar: YAMLScalar, for kind: KeySpec.Kind) -> String? {
        switch (kind, scalar.type) {
        case (.bool, .bool), (.integer, .int): nil
        case (.bool, _): "is \(scalar.type), not a boolean"
        case (.integer, .float): "is not a whole number"
        case (.integer, _): "is \(scalar.type), not an integer"
        case (.octalMode, .int), (.octalMode, .string): nil  // `mode: 0660` reads as written
        case (_, .string): nil
        default: "is \(scalar.type), not a string"
        }
    }

    private static func provider(_ given: Given, _ spec: KeySpec) -> Result<WAFSettingValue, Problem> {
        switch given {
        case .text(let text): return .success(.text(text))
        case .yaml(.scalar(let scalar)):
            switch scalar.type {
            case .null:
                let required = spec.defaultDescription == "required"
                return .failure(Problem(required ? "is null" : "is null; leave the key out for its default (\(spec.defaultDescription ?? "none"))"))
            case .bool(let flag): return .success(.bool(flag))
            case .int(let number): return .success(.int(number))
            case .float(let number): return .success(.double(number))
            case .string: return .success(.string(scalar.text))
            }
        case .yaml(let node):
            return .failure(Problem("is \(node.kind), not a single value"))
        }
    }

    private static func list(_ given: Given) -> Result<CheckedValue, Problem> {
        switch given {
        case .text(let text): return .success(.list(splitList(text)))
        case .yaml(.scalar(let scalar)): return .success(.list(scalar.type == .null ? [] : splitList(scalar.text)))
        case .yaml(.sequence(let items)):
            var names: [String] = []
            for item in items {
                guard case .scalar(let scalar) = item, scalar.type == .string || scalar.type.isInteger else {
                    return .failure(Problem("holds \(item.kind), not a user or group name or id"))
                }
                names += splitList(scalar.text)
            }
            return .success(.list(names))
        case .yaml(let node):
            return .failure(Problem("is \(node.kind), not a list"))
        }
    }

    /// "alice, 1000,bob" → alice, 1000, bob (user and group names hold no whitespace).
    static func splitList(_ text: String) -> [String] {
        text.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }.filter { !$0.isEmpty }
    }

    private static func daemon(_ text: String, _ kind: KeySpec.Kind) -> Result<CheckedValue, Problem> {
        switch kind {
        case .choice(let choices):
            return choices.contains(text) ? .success(.text(text)) : .failure(Problem("is not allowed"))
        case .absolutePath:
            if !text.hasPrefix("/") { return .failure(Problem("is not an absolute path")) }
            return text.utf8.contains(0) ? .failure(Problem("holds a NUL byte")) : .success(.text(text))
        case .socketPath:
            return daemon(text, .absolutePath).flatMap { _ in socketPathFits(text).map { .failure($0) } ?? .success(.text(text)) }
        case .octalMode:
            guard let mode = octal(text) else { return .failure(Problem("is not an octal mode")) }
            return mode <= 0o777 ? .success(.mode(mode)) : .failure(Problem("is out of range"))
        case .bool:
            switch text.lowercased() {
            case "true": return .success(.bool(true))
            case "false": return .success(.bool(false))
            default: return .failure(Problem("is not a boolean"))
            }
        case .integer(let range):
            guard let number = Int(text.trimmingWhitespace) else { return .failure(Problem("is not an integer")) }
            return range.contains(number) ? .success(.int(number)) : .failure(Problem("is out of range"))
        case .listenAddress:
            if text.hasPrefix("/"), let tooLong = socketPathFits(text) { return .failure(tooLong) }
            return ListenAddress(text).map { _ in .success(.text(text)) }
                ?? .failure(Problem("is neither a Unix socket path nor a loopback address with a port"))
        case .url:
            return text.contains("://") ? .success(.text(text)) : .failure(Problem("is not an absolute URL"))
        case .groupName:
            return isGroupName(text) ? .success(.text(text)) : .failure(Problem("is neither a group name nor a numeric gid"))
        case .loopbackAddress:
            guard case .loopback? = ListenAddress(text) else { return .failure(Problem("is not a loopback address with a port")) }
            return .success(.text(text))
        case .tcpAddress:
            return TCPAddress(text) == nil ? .failure(Problem("is not an address with a port")) : .success(.text(text))
        case .egressProxy:
            switch Egress.parseProxy(text) {
            case .success: return .success(.text(text))
            case .failure(let problem): return .failure(Problem(problem.description))
            }
        case .provider, .list, .actions:
            preconditionFailure("checked elsewhere")
        }
    }

    /// A socket path longer than `sockaddr_un` holds cannot be bound: refused here, at configuration
    /// time (78, naming the key), not as a failed bind after start.
    private static func socketPathFits(_ path: String) -> Problem? {
        let bytes = path.utf8.count
        guard bytes > ListenAddress.maximumPathBytes else { return nil }
        return Problem("is \(bytes) bytes long; a Unix socket address holds at most \(ListenAddress.maximumPathBytes)")
    }

    /// What useradd and groupadd accept (letters, digits, `_`, `-`, `.`, not starting with `-`, at
    /// most 32), or a number.
    static func isGroupName(_ text: String) -> Bool {
        if let id = UInt32(text) { return id != UInt32.max }
        let bytes = Array(text.utf8)
        guard (1...32).contains(bytes.count), bytes[0] != UInt8(ascii: "-") else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "_-.".utf8.contains(byte)
        }
    }

    /// "0660", "660" or "0o660".
    static func octal(_ text: String) -> UInt16? {
        let digits = text.hasPrefix("0o") ? String(text.dropFirst(2)) : text
        guard !digits.isEmpty, digits.count <= 4 else { return nil }
        return UInt16(digits, radix: 8)
    }
}

extension YAMLScalar.ScalarType {
    var isInteger: Bool { if case .int = self { true } else { false } }
}

extension String {
    var trimmingWhitespace: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
