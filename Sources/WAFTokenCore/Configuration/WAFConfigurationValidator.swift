#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Collects every problem of a configuration instead of stopping at the first (CFG-9).
struct WAFConfigurationValidator {
    private(set) var issues: [WAFConfigurationIssue] = []
    /// The range profile the integer keys are checked against (CFG-10).
    var profile = WAFRangeProfile.seed

    mutating func issue(key: String, value: String?, problem: String, allowed: String) {
        issues.append(WAFConfigurationIssue(key: key, value: value, problem: problem, allowed: allowed))
    }

    private mutating func refuse<T>(_ key: WAFConfigurationKey, _ value: WAFSettingValue?, _ problem: String) -> T? {
        issue(key: key.rawValue, value: value?.rendered, problem: problem, allowed: key.allowed(in: profile))
        return nil
    }

    func finish() throws(WAFConfigurationError) {
        if !issues.isEmpty { throw WAFConfigurationError(issues: issues) }
    }

    mutating func required(_ key: WAFConfigurationKey, _ value: WAFSettingValue?) -> WAFSettingValue? {
        guard let value else { return refuse(key, nil, "is required") }
        return value
    }

    mutating func bool(_ key: WAFConfigurationKey, _ value: WAFSettingValue) -> Bool? {
        switch value {
        case .bool(let flag): return flag
        case .text(let text) where text.lowercased() == "true": return true
        case .text(let text) where text.lowercased() == "false": return false
        default: return refuse(key, value, "is \(value.kind), not a boolean")
        }
    }

    mutating func int(_ key: WAFConfigurationKey, _ value: WAFSettingValue) -> Int? {
        let number: Int?
        switch value {
        case .int(let whole): number = whole
        case .text(let text): number = Int(text.trimmedOfWhitespace)
        case .double(let real) where real.rounded() == real && abs(real) < 1e15: number = Int(real)
        case .double: return refuse(key, value, "is not a whole number")
        case .string, .bool: return refuse(key, value, "is \(value.kind), not an integer")
        }
        guard let number else { return refuse(key, value, "is not an integer") }
        guard let allowed = profile.range(of: key), allowed.contains(number) else {
            return refuse(key, value, outOfRange(key, number))
        }
        return number
    }

    /// "is out of range", naming the profile when the profiles differ for `key` (CFG-10).
    private func outOfRange(_ key: WAFConfigurationKey, _ number: Int) -> String {
        let ranges = Set(WAFRangeProfile.allCases.map { $0.range(of: key) })
        guard ranges.count > 1 else { return "is out of range" }
        let others = profile.others(accepting: number, for: key).map { "ranges: \($0.rawValue)" }
        let hint = others.isEmpty ? "" : "; \(others.joined(separator: " or ")) would accept it"
        return "is out of range for ranges: \(profile.rawValue)\(hint)"
    }

    mutating func string(_ key: WAFConfigurationKey, _ value: WAFSettingValue) -> String? {
        switch value {
        case .string(let text), .text(let text): return text
        default: return refuse(key, value, "is \(value.kind), not a string")
        }
    }

    // MARK: CFG-10

    mutating func rangeProfile(_ value: WAFSettingValue) -> WAFRangeProfile? {
        guard let text = string(.ranges, value) else { return nil }
        guard let profile = WAFRangeProfile(rawValue: text) else { return refuse(.ranges, value, "is not a range profile") }
        return profile
    }

    // MARK: CFG-1

    mutating func applicationIntegrationUrl(_ value: WAFSettingValue) -> URL? {
        let key = WAFConfigurationKey.applicationIntegrationUrl
        guard let text = string(key, value) else { return nil }
        let trimmed = text.trimmedOfWhitespace
        guard !trimmed.isEmpty else { return refuse(key, value, "is empty") }
        switch WAFServiceURL.check(trimmed) {
        case .success(let checked): return checked.url
        case .failure(let problem): return refuse(key, value, problem.text)
        }
    }

    // MARK: CFG-2

    mutating func domainName(_ value: WAFSettingValue) -> String? {
        let key = WAFConfigurationKey.domainName
        guard let text = string(key, value) else { return nil }
        let domain = text.lowercased()
        if domain.isEmpty { return refuse(key, value, "is empty") }
        // An IP literal is a host, and the only way to name one in a cookie (the demo's 127.0.0.1).
        if WAFHost.ipv4Octets(domain) != nil { return domain }
        if let address = WAFHost.ipv6Literal(domain) { return address }
        if domain.contains("://") { return refuse(key, value, "has a scheme") }
        if domain.contains("/") { return refuse(key, value, "has a path") }
        if domain.contains("?") || domain.contains("#") { return refuse(key, value, "has a query") }
        if domain.contains("@") { return refuse(key, value, "holds user credentials") }
        if domain.contains(":") { return refuse(key, value, "has a port") }
        if !domain.allSatisfy(\.isASCII) {
            return refuse(key, value, "is not ASCII (give an internationalised name in its xn-- form)")
        }
        if domain.utf8.count > 253 { return refuse(key, value, "is longer than 253 characters") }
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        for label in labels {
            let valid =
                (1...63).contains(label.count)
                && label.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" }
                && label.first != "-" && label.last != "-"
            if !valid { return refuse(key, value, "is not a valid host name") }
        }
        if PublicSuffixList.isPublicSuffix(domain) {
            return refuse(key, value, "is a public suffix by the Public Suffix List")
        }
        return domain
    }

    // MARK: CFG-7

    mutating func tokenCookiePath(_ value: WAFSettingValue) -> String? {
        let key = WAFConfigurationKey.tokenCookiePath
        guard let path = string(key, value) else { return nil }
        guard path.hasPrefix("/") else { return refuse(key, value, "does not start with /") }
        let forbidden = path.unicodeScalars.contains {
            $0 == ";" || $0 == " " || $0.properties.generalCategory == .control
        }
        if forbidden { return refuse(key, value, "holds a space, ';' or a control character") }
        return path
    }
}

extension StringProtocol {
    /// The text without leading and trailing whitespace (FoundationEssentials has no trimming).
    /// Found from both ends in place: reversing the text twice, character by character, was a
    /// measurable part of loading a hundred providers.
    var trimmedOfWhitespace: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }
}
