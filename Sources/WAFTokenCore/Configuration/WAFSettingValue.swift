/// A setting as a configuration source gives it, before it is checked against its key's type.
///
/// A typed source (a YAML file) says what it holds: `"5"` is a string there, not a number, and is
/// refused for an integer key (CFG-9). Text from the environment or the command line has no type of
/// its own and is read as whatever its key expects.
public enum WAFSettingValue: Sendable, Hashable, CustomStringConvertible {
    case string(String)
    case int(Int)
    case bool(Bool)
    case double(Double)
    /// Untyped text: an environment variable or a command-line option.
    case text(String)

    /// The value for an error message: strings quoted, so that an empty or blank value shows.
    public var rendered: String {
        switch self {
        case .string(let text): text.debugDescription
        // Untyped text that reads as a number or a boolean is shown as one, like the value it is.
        case .text(let text): Int(text) != nil || text == "true" || text == "false" ? text : text.debugDescription
        case .int(let number): String(number)
        case .bool(let flag): String(flag)
        case .double(let number): String(number)
        }
    }

    /// What kind of value it is, for "is a string, not an integer".
    public var kind: String {
        switch self {
        case .string, .text: "a string"
        case .int, .double: "a number"
        case .bool: "a boolean"
        }
    }

    public var description: String { rendered }
}
