/// A YAML document as the configuration reads it: scalars, sequences and mappings, with each plain
/// scalar's type resolved by the YAML 1.2 core schema (`5` is an integer, `"5"` a string).
indirect enum YAMLNode: Sendable, Hashable {
    case scalar(YAMLScalar)
    case sequence([YAMLNode])
    case mapping([YAMLPair])

    /// YAML's null: `key:`, `~`, `null`.
    var isNull: Bool {
        if case .scalar(let scalar) = self, scalar.type == .null { return true }
        return false
    }

    /// What the node is, for "is a list, not a single value".
    var kind: String {
        switch self {
        case .scalar(let scalar): scalar.type.description
        case .sequence: "a list"
        case .mapping: "a map"
        }
    }
}

struct YAMLPair: Sendable, Hashable {
    let key: YAMLNode
    let value: YAMLNode
}

struct YAMLScalar: Sendable, Hashable {
    enum ScalarType: Sendable, Hashable, CustomStringConvertible {
        case null, bool(Bool), int(Int), float(Double), string

        var description: String {
            switch self {
            case .null: "empty"
            case .bool: "a boolean"
            case .int, .float: "a number"
            case .string: "a string"
            }
        }
    }

    /// The text as written (without quotes).
    let text: String
    let type: ScalarType

    /// Resolves `text` (plain, or quoted when `quoted`) by the YAML 1.2 core schema, unless a
    /// standard tag says otherwise (`!!str 5` is a string).
    init(text: String, quoted: Bool, tag: String?) {
        self.text = text
        switch tag {
        case "tag:yaml.org,2002:null": type = .null
        case "tag:yaml.org,2002:str", "!": type = .string
        case "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float":
            type = Self.resolve(text)
        default: type = quoted ? .string : Self.resolve(text)
        }
    }

    static func resolve(_ text: String) -> ScalarType {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF": return .float(.infinity)
        case "-.inf", "-.Inf", "-.INF": return .float(-.infinity)
        case ".nan", ".NaN", ".NAN": return .float(.nan)
        default: break
        }
        if text.hasPrefix("0o"), let value = Int(text.dropFirst(2), radix: 8) { return .int(value) }
        if text.hasPrefix("0x"), let value = Int(text.dropFirst(2), radix: 16) { return .int(value) }
        let digits = text.first == "-" || text.first == "+" ? text.dropFirst() : Substring(text)
        if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(text) { return .int(value) }
        if isFloat(digits), let value = Double(text) { return .float(value) }
        return .string
    }

    /// `[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?` or `\.[0-9]+(...)`, as the core schema has it.
    private static func isFloat(_ text: Substring) -> Bool {
        var rest = text[...]
        let whole = rest.prefix { $0.isASCII && $0.isNumber }
        rest = rest.dropFirst(whole.count)
        var fraction = Substring("")
        if rest.first == "." {
            rest = rest.dropFirst()
            fraction = rest.prefix { $0.isASCII && $0.isNumber }
            rest = rest.dropFirst(fraction.count)
        }
        guard !whole.isEmpty || !fraction.isEmpty else { return false }
        if let marker = rest.first, marker == "e" || marker == "E" {
            rest = rest.dropFirst()
            if rest.first == "-" || rest.first == "+" { rest = rest.dropFirst() }
            let exponent = rest.prefix { $0.isASCII && $0.isNumber }
            guard !exponent.isEmpty else { return false }
            rest = rest.dropFirst(exponent.count)
        }
        return rest.isEmpty && (text.contains(".") || text.contains("e") || text.contains("E"))
    }
}
