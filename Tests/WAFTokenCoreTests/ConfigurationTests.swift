import Foundation
import Testing
import WAFTestTraits

@testable import WAFTokenCore

private let url = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"

private func issues(_ build: () throws(WAFConfigurationError) -> WAFConfiguration) -> [WAFConfigurationIssue] {
    do {
        _ = try build()
        return []
    } catch {
        return error.issues
    }
}

private func refusal(url: String = url, domain: String = "example.com") -> WAFConfigurationIssue? {
    issues { () throws(WAFConfigurationError) in
        try WAFConfiguration(applicationIntegrationUrl: url, domainName: domain)
    }.first
}

@Suite("Configuration", .offPool, .timeLimit(.minutes(1)))
struct ConfigurationTests {
    @Test("OBJ-2: an invalid setting is refused with key, value and what is allowed")
    func OBJ2_invalidSettingNamesKeyValueAndAllowed() throws {
        let found = issues { () throws(WAFConfigurationError) in
            try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", maxRetryCount: 11)
        }
        let issue = try #require(found.first)
        #expect(found.count == 1)
        #expect(issue.key == "maxRetryCount")
        #expect(issue.value == "11")
        #expect(issue.allowed == "an integer 0…10")
        #expect(issue.description == "maxRetryCount: 11 is out of range for ranges: seed; ranges: current would accept it (allowed: an integer 0…10)")
    }

    @Test("OBJ-2: every problem is reported at once, not only the first")
    func OBJ2_allProblemsReportedTogether() {
        let found = issues { () throws(WAFConfigurationError) in
            try WAFConfiguration(
                applicationIntegrationUrl: "ftp://x", domainName: "co.uk", maxErrorTokenRefreshDelayMsec: 0,
                maxRetryCount: -1, tokenCookiePath: "web", tokenRefreshDelaySec: 601)
        }
        #expect(
            found.map(\.key) == [
                "applicationIntegrationUrl", "domainName", "maxErrorTokenRefreshDelayMsec", "maxRetryCount",
                "tokenCookiePath", "tokenRefreshDelaySec",
            ])
    }

    @Test("CFG-1: https, or http to loopback only; one trailing slash dropped")
    func CFG1_applicationIntegrationUrl() throws {
        let accepted = [
            url, "https://abc.edge.sdk.awswaf.com/a/b", "http://127.0.0.1:8080/x/y/", "http://localhost:1/",
            "http://[::1]:9/p/", "http://127.1.2.3/",
        ]
        for text in accepted { #expect(refusal(url: text) == nil, "\(text)") }

        let refused: [(String, String)] = [
            ("http://example.com/a/", "uses http to a host that is not loopback"),
            ("http://10.0.0.1/a/", "uses http to a host that is not loopback"),
            ("ftp://example.com/a/", "has the scheme ftp"),
            ("/relative/path", "is not an absolute URL"),
            ("not a url", "is not an absolute URL"),
            ("", "is empty"),
            ("https://example.com/a/?x=1", "has a query or fragment"),
            ("https://example.com/a/#f", "has a query or fragment"),
            ("https://user:pw@example.com/a/", "holds user credentials"),
        ]
        for (text, problem) in refused {
            let issue = refusal(url: text)
            #expect(issue?.key == "applicationIntegrationUrl", "\(text)")
            #expect(issue?.problem == problem, "\(text)")
            // The value as given, but a password (CFG-9, EGRESS-3).
            #expect(issue?.value == text.replacingOccurrences(of: "user:pw@", with: "***@").debugDescription)
        }

        let config = try WAFConfiguration(applicationIntegrationUrl: "https://h.example/a/b/", domainName: "example.com")
        #expect(config.tokenServiceBaseURL == "https://h.example/a/b")
        let noSlash = try WAFConfiguration(applicationIntegrationUrl: "https://h.example/a/b", domainName: "example.com")
        #expect(noSlash.tokenServiceBaseURL == "https://h.example/a/b")
        let twoSlashes = try WAFConfiguration(applicationIntegrationUrl: "https://h.example/a//", domainName: "example.com")
        #expect(twoSlashes.tokenServiceBaseURL == "https://h.example/a/")
    }

    @Test("CFG-2: a bare host name that the Public Suffix List does not call a public suffix")
    func CFG2_domainName() throws {
        let longest = [Self.hostName(length: 253), String(repeating: "a", count: 63) + ".example.com", "a-b.example.com"]
        for domain in ["example.com", "aws.amazon.com", "foo.example.co.uk", "usa.gov", "localhost", "127.0.0.1", "xn--bcher-kva.example"] + longest {
            #expect(refusal(domain: domain) == nil, "\(domain) should be accepted")
        }
        let refused: [(String, String)] = [
            ("com", "is a public suffix by the Public Suffix List"),
            ("co.uk", "is a public suffix by the Public Suffix List"),
            ("github.io", "is a public suffix by the Public Suffix List"),
            ("s3.amazonaws.com", "is a public suffix by the Public Suffix List"),
            ("https://example.com", "has a scheme"),
            ("example.com:443", "has a port"),
            ("example.com/login", "has a path"),
            ("example.com?a=b", "has a query"),
            ("user@example.com", "holds user credentials"),
            ("", "is empty"),
            ("exa mple.com", "is not a valid host name"),
            ("-bad.example.com", "is not a valid host name"),
            ("bad-.example.com", "is not a valid host name"),
            ("example.com.", "is not a valid host name"),
            (String(repeating: "a", count: 64) + ".example.com", "is not a valid host name"),
            (Self.hostName(length: 254), "is longer than 253 characters"),
            ("example..com", "is not a valid host name"),
            ("bücher.example", "is not ASCII (give an internationalised name in its xn-- form)"),
        ]
        for (domain, problem) in refused {
            let issue = refusal(domain: domain)
            #expect(issue?.key == "domainName", "\(domain)")
            #expect(issue?.problem == problem, "\(domain)")
        }
        // IP literals are hosts too: IPv4, and IPv6 bare or in brackets, kept in canonical form; a
        // cookie for an address is host-only.
        for (given, kept) in [("::1", "::1"), ("[::1]", "::1"), ("2001:DB8:0:0::1", "2001:db8::1"), ("203.0.113.9", "203.0.113.9")] {
            let config = try WAFConfiguration(applicationIntegrationUrl: url, domainName: given)
            #expect(config.domainName == kept, "\(given)")
            let cookie = WAFCookie(
                token: WAFToken(value: "v", fetchedAt: .now, fetchedAtMonotonic: .origin), domainName: config.domainName, path: "/", secure: false)
            #expect(cookie.domain == kept && !cookie.includesSubdomains, "\(given)")
        }
        #expect(refusal(domain: "[::1]:443")?.problem == "has a port")
        #expect(refusal(domain: "::g")?.problem == "has a port")
        // Host names are case-insensitive; the list is consulted, and the token built, in lower case.
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "WWW.Example.COM").domainName == "www.example.com")
        #expect(refusal(domain: "CO.UK")?.problem == "is a public suffix by the Public Suffix List")
        #expect(PublicSuffixList.isAvailable)
    }

    /// A valid host name of exactly `length` characters: labels of 63 and fewer under example.com.
    static func hostName(length: Int) -> String {
        var labels: [String] = []
        var remaining = length - "example.com".count
        while remaining > 0 {
            let label = min(63, remaining - 1)  // the label and its dot
            labels.append(String(repeating: "b", count: label))
            remaining -= label + 1
        }
        let name = (labels + ["example.com"]).joined(separator: ".")
        precondition(name.count == length && !labels.contains(""), "no host name of \(length) characters this way")
        return name
    }

    @Test("CFG-3: backgroundRefreshEnabled defaults to true")
    func CFG3_backgroundRefreshDefaultsOn() throws {
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com").backgroundRefreshEnabled)
        #expect(
            try WAFConfiguration(settings: ["applicationIntegrationUrl": .string(url), "domainName": .string("example.com")]).backgroundRefreshEnabled
        )
    }

    @Test("CFG-4: maxErrorTokenRefreshDelayMsec defaults to 5000, allows 1…30000")
    func CFG4_maxErrorTokenRefreshDelayMsec() throws {
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com").maxErrorTokenRefreshDelayMsec == 5000)
        for value in [1, 30000] {
            #expect(
                try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", maxErrorTokenRefreshDelayMsec: value)
                    .maxErrorTokenRefreshDelayMsec == value)
        }
        for value in [0, -5, 30001] {
            let found = issues { () throws(WAFConfigurationError) in
                try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", maxErrorTokenRefreshDelayMsec: value)
            }
            #expect(found.map(\.description) == ["maxErrorTokenRefreshDelayMsec: \(value) is out of range (allowed: an integer 1…30000)"])
        }
    }

    @Test("CFG-5: maxRetryCount defaults to 5 with background refresh, 3 without; allows 0…10")
    func CFG5_maxRetryCount() throws {
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com").maxRetryCount == 5)
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", backgroundRefreshEnabled: false).maxRetryCount == 3)
        #expect(
            try WAFConfiguration(settings: [
                "applicationIntegrationUrl": .string(url), "domainName": .string("example.com"), "backgroundRefreshEnabled": .bool(false),
            ]).maxRetryCount == 3)
        for value in [0, 10] {
            #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", maxRetryCount: value).maxRetryCount == value)
        }
        for value in [-1, 11] {
            let hint = value > 10 ? "; ranges: current would accept it" : ""
            #expect(
                refusalOf(maxRetryCount: value)?.description
                    == "maxRetryCount: \(value) is out of range for ranges: seed\(hint) (allowed: an integer 0…10)")
        }
    }

    private func refusalOf(maxRetryCount: Int) -> WAFConfigurationIssue? {
        issues { () throws(WAFConfigurationError) in
            try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", maxRetryCount: maxRetryCount)
        }.first
    }

    @Test("CFG-6: setTokenCookie defaults to true")
    func CFG6_setTokenCookieDefaultsOn() throws {
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com").setTokenCookie)
    }

    @Test("CFG-7: tokenCookiePath defaults to / and must start with /")
    func CFG7_tokenCookiePath() throws {
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com").tokenCookiePath == "/")
        #expect(
            try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", tokenCookiePath: "/web/login").tokenCookiePath
                == "/web/login")
        let cases: [(String, String)] = [
            ("web/login", "does not start with /"), ("", "does not start with /"),
            ("/a b", "holds a space, ';' or a control character"), ("/a;b", "holds a space, ';' or a control character"),
            ("/a\nb", "holds a space, ';' or a control character"),
        ]
        for (path, problem) in cases {
            let found = issues { () throws(WAFConfigurationError) in
                try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", tokenCookiePath: path)
            }
            #expect(found.map(\.problem) == [problem], "\(path.debugDescription)")
            #expect(found.first?.key == "tokenCookiePath")
        }
    }

    @Test("CFG-8: tokenRefreshDelaySec defaults to 300, allows 300…600")
    func CFG8_tokenRefreshDelaySec() throws {
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com").tokenRefreshDelaySec == 300)
        for value in [300, 450, 600] {
            #expect(
                try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", tokenRefreshDelaySec: value).tokenRefreshDelaySec
                    == value)
        }
        for value in [299, 601, 0] {
            let found = issues { () throws(WAFConfigurationError) in
                try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", tokenRefreshDelaySec: value)
            }
            let hint = value == 299 ? "; ranges: current would accept it" : ""
            #expect(
                found.map(\.description) == ["tokenRefreshDelaySec: \(value) is out of range for ranges: seed\(hint) (allowed: an integer 300…600)"])
        }
    }

    @Test("CFG-9: wrong types and out-of-range values are refused, never clamped or coerced")
    func CFG9_wrongTypeOrRangeRefusedNeverClamped() {
        let found = issues { () throws(WAFConfigurationError) in
            try WAFConfiguration(settings: [
                "applicationIntegrationUrl": .int(42),
                "domainName": .bool(true),
                "backgroundRefreshEnabled": .string("yes"),
                "maxErrorTokenRefreshDelayMsec": .double(2.5),
                "maxRetryCount": .string("five"),
                "setTokenCookie": .int(1),
                "tokenCookiePath": .string("/ok"),
                "tokenRefreshDelaySec": .string("900"),
                "tokenRefreshDelay": .int(300),
            ])
        }
        #expect(
            found.map(\.description) == [
                "tokenRefreshDelay: 300 is not a configuration key (allowed: applicationIntegrationUrl, domainName, backgroundRefreshEnabled, maxErrorTokenRefreshDelayMsec, maxRetryCount, setTokenCookie, tokenCookiePath, tokenRefreshDelaySec, ranges)",
                "applicationIntegrationUrl: 42 is a number, not a string (allowed: \(WAFConfigurationKey.applicationIntegrationUrl.allowed()))",
                "domainName: true is a boolean, not a string (allowed: \(WAFConfigurationKey.domainName.allowed()))",
                "backgroundRefreshEnabled: \"yes\" is a string, not a boolean (allowed: true or false)",
                "maxErrorTokenRefreshDelayMsec: 2.5 is not a whole number (allowed: an integer 1…30000)",
                "maxRetryCount: \"five\" is a string, not an integer (allowed: an integer 0…10)",
                "setTokenCookie: 1 is a number, not a boolean (allowed: true or false)",
                "tokenRefreshDelaySec: \"900\" is a string, not an integer (allowed: an integer 300…600)",
            ])
        let missing = issues { () throws(WAFConfigurationError) in try WAFConfiguration(settings: [:]) }
        #expect(
            missing.map(\.description) == [
                "applicationIntegrationUrl: is required (allowed: \(WAFConfigurationKey.applicationIntegrationUrl.allowed()))",
                "domainName: is required (allowed: \(WAFConfigurationKey.domainName.allowed()))",
            ])
    }

    @Test("CFG-9: strings from the environment or a command line are read as their key's type")
    func CFG9_stringsConvertToTheKeysType() throws {
        let config = try WAFConfiguration(settings: [
            "applicationIntegrationUrl": .string(url), "domainName": .string("example.com"),
            "backgroundRefreshEnabled": .text("FALSE"), "maxRetryCount": .text(" 7 "),
            "tokenRefreshDelaySec": .text("600"), "maxErrorTokenRefreshDelayMsec": .double(1000),
        ])
        #expect(config.backgroundRefreshEnabled == false)
        #expect(config.maxRetryCount == 7)
        #expect(config.tokenRefreshDelaySec == 600)
        #expect(config.maxErrorTokenRefreshDelayMsec == 1000)
        // The effective settings read back into the same configuration.
        #expect(try WAFConfiguration(settings: config.settings) == config)
    }
}

@Suite("Configuration: range profiles", .offPool, .timeLimit(.minutes(1)))
struct RangeProfileTests {
    private func problems(_ settings: [String: WAFSettingValue]) -> [String] {
        var all = settings
        all["applicationIntegrationUrl"] = .string(url)
        all["domainName"] = .string("example.com")
        do {
            _ = try WAFConfiguration(settings: all)
            return []
        } catch {
            return error.issues.map(\.description)
        }
    }

    @Test("CFG-10: ranges: current allows tokenRefreshDelaySec 88…300 (default 88) and maxRetryCount 0…100")
    func CFG10_currentProfile() throws {
        let current = try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", ranges: .current)
        #expect(current.tokenRefreshDelaySec == 88)
        #expect(current.maxRetryCount == 5)
        #expect(current.ranges == .current)
        for delay in [88, 300] {
            #expect(
                try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", tokenRefreshDelaySec: delay, ranges: .current)
                    .tokenRefreshDelaySec == delay)
        }
        #expect(
            try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com", maxRetryCount: 100, ranges: .current).maxRetryCount == 100
        )
        #expect(
            try WAFConfiguration(settings: [
                "applicationIntegrationUrl": .string(url), "domainName": .string("example.com"), "ranges": .text("current"),
                "tokenRefreshDelaySec": .text("120"),
            ]).tokenRefreshDelaySec == 120)
        #expect(
            problems(["ranges": .string("current"), "tokenRefreshDelaySec": .int(87)]) == [
                "tokenRefreshDelaySec: 87 is out of range for ranges: current (allowed: an integer 88…300)"
            ])
        #expect(
            problems(["ranges": .string("current"), "tokenRefreshDelaySec": .int(301), "maxRetryCount": .int(101)]) == [
                "maxRetryCount: 101 is out of range for ranges: current (allowed: an integer 0…100)",
                "tokenRefreshDelaySec: 301 is out of range for ranges: current; ranges: seed would accept it (allowed: an integer 88…300)",
            ])
    }

    @Test("CFG-10: the seed profile is the default, and its refusals say which profile would accept the value")
    func CFG10_seedIsTheDefault() throws {
        #expect(try WAFConfiguration(applicationIntegrationUrl: url, domainName: "example.com").ranges == .seed)
        #expect(
            problems(["tokenRefreshDelaySec": .int(88)]) == [
                "tokenRefreshDelaySec: 88 is out of range for ranges: seed; ranges: current would accept it (allowed: an integer 300…600)"
            ])
        #expect(
            problems(["maxRetryCount": .int(50)]) == [
                "maxRetryCount: 50 is out of range for ranges: seed; ranges: current would accept it (allowed: an integer 0…10)"
            ])
        #expect(problems(["ranges": .string("latest")]) == ["ranges: \"latest\" is not a range profile (allowed: seed or current)"])
        // Both profiles agree on the error delay: nothing to suggest.
        #expect(
            problems(["maxErrorTokenRefreshDelayMsec": .int(0)]) == [
                "maxErrorTokenRefreshDelayMsec: 0 is out of range (allowed: an integer 1…30000)"
            ])
    }

    @Test("CFG-10: a provider on the current profile refreshes every 88 s and pauses after 88 s of inactivity")
    func CFG10_currentProfileDrivesTheProvider() {
        let harness = Harness(.test(ranges: .current))
        harness.advance(to: 180)
        #expect(harness.service.callTimes == seconds(0, 88, 176))
        harness.setLifecycle(.background)
        harness.advance(to: 268)
        #expect(!harness.provider.status().lifecycle.paused)
        harness.advance(to: 268.001)
        #expect(harness.provider.status().lifecycle.paused)
    }
}
