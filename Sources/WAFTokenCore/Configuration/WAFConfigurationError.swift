/// One refused setting: which key, the value as given, what is wrong and what is allowed (CFG-9).
public struct WAFConfigurationIssue: Error, Sendable, Hashable, CustomStringConvertible {
    public let key: String
    /// The value as given, rendered for a human (strings quoted); nil when the key is missing.
    public let value: String?
    public let problem: String
    public let allowed: String

    public init(key: String, value: String?, problem: String, allowed: String) {
        self.key = key
        self.value = value.map(Self.withoutCredentials)
        self.problem = problem
        self.allowed = allowed
    }

    /// `text` with the user and password of every URL in it (`scheme://user:pass@host`), and of a
    /// value that begins with them (`user:pass@host`, as curl takes a proxy without a scheme),
    /// replaced by `***`: a refused proxy URL, say from `https_proxy`, is named on stderr, in the
    /// journal and in a refused reload's log line, where a password must never be (EGRESS-3).
    public static func withoutCredentials(_ text: String) -> String {
        var result = ""
        var rest = Substring(text)
        // Up to the next space, not the authority's end: a refused value is malformed by
        // definition, and its password may hold `/`, `?`, `#` or a quote (rendered, `\"`). What
        // this masks beyond a password (`?x=a@b`) is never worth a password shown.
        func authority(_ from: Substring) -> Substring { from.prefix { !$0.isWhitespace } }
        // `user:pass@` at the start, after an opening quote: a colon before the `@` tells it from
        // an address.
        let opening = rest.prefix { $0 == "\"" }
        let start = authority(rest.dropFirst(opening.count))
        if !start.contains("://"), let at = start.lastIndex(of: "@"), start[..<at].contains(":") {
            result += opening + "***"
            rest = rest[at...]
        }
        while let scheme = rest.firstRange(of: "://") {
            result += rest[..<scheme.upperBound]
            rest = rest[scheme.upperBound...]
            if let at = authority(rest).lastIndex(of: "@") {
                result += "***"
                rest = rest[at...]
            }
        }
        return result + rest
    }

    public var description: String {
        if let value {
            return "\(key): \(value) \(problem) (allowed: \(allowed))"
        }
        return "\(key): \(problem) (allowed: \(allowed))"
    }
}

/// A configuration was refused (OBJ-2). Holds every problem found, not only the first.
public struct WAFConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public let issues: [WAFConfigurationIssue]

    public init(issues: [WAFConfigurationIssue]) {
        precondition(!issues.isEmpty, "a configuration error names at least one issue")
        self.issues = issues
    }

    public var description: String {
        issues.map(\.description).joined(separator: "\n")
    }
}
