import ArgumentParser
import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonConfiguration
@testable import WAFTokenDaemon

private let url = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"
private let required = "applicationIntegrationUrl: \(url)\ndomainName: example.com\n"

func configFile(_ text: String) throws -> String {
    let path = scratchPath("waf-config").appendingPathExtension("yaml").path
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

private func load(
    cli: [String: String] = [:], env: [String: String] = [:], yaml: String? = nil
) throws -> Result<DaemonConfiguration, WAFConfigurationError> {
    ConfigurationLoader.load(ConfigurationSources(commandLine: cli, environment: env, file: try yaml.map(configFile) ?? "/dev/null"))
}

func problems(_ result: Result<DaemonConfiguration, WAFConfigurationError>) -> [String] {
    if case .failure(let error) = result { return error.issues.map(\.description) }
    return []
}

@Suite("Daemon configuration", .offPool)
struct ConfigurationLoaderTests {
    @Test("precedence: command line > environment > file > default")
    func precedence() throws {
        let yaml = """
            applicationIntegrationUrl: \(url)
            domainName: file.example.com
            maxRetryCount: 2
            tokenRefreshDelaySec: 400
            socket:
              path: /file/token.sock
              mode: "0600"
            log:
              level: debug
            """
        let config = try load(
            cli: ["domainName": "cli.example.com", "socket.path": "/cli/token.sock"],
            env: ["WAF_TOKEND_DOMAIN_NAME": "env.example.com", "WAF_TOKEND_MAX_RETRY_COUNT": "7", "WAF_TOKEND_SOCKET_PATH": "/env/token.sock"],
            yaml: yaml
        ).get()
        #expect(config.provider.domainName == "cli.example.com")
        #expect(config[Keys.socketPath] == "/cli/token.sock")
        #expect(config.provider.maxRetryCount == 7)
        #expect(config.provider.tokenRefreshDelaySec == 400)
        #expect(config[Keys.socketMode] == 0o600)
        #expect(config[Keys.logLevel] == .debug)
        #expect(config.provider.maxErrorTokenRefreshDelayMsec == 5000)
        #expect(config[Keys.lifecyclePlatform] == .ios)
        #expect(config[Keys.tokenServiceTimeoutSec] == 10)
        #expect(config[Keys.refreshJitter])
    }

    @Test("every key of the table is read from its variable, its option and the file, with the same meaning")
    func everyKeyFromEverySource() throws {
        let values = Self.validValues
        let top = Keys.all.filter(\.topLevel)
        #expect(Set(values.keys) == Set(top.map(\.name)), "a value for every top-level key of the table")
        let environment = Dictionary(uniqueKeysWithValues: top.map { ($0.environmentName, values[$0.name]!) })
        #expect(environment["WAF_TOKEND_DOMAIN_NAME"] == "example.com")
        #expect(environment["WAF_TOKEND_TOKEN_SERVICE_CA_FILE"] == "/etc/ca.pem")
        let command = try WAFTokendCommand.parse(top.flatMap { [$0.optionName, values[$0.name]!] })
        #expect(command.keys.values == values)
        let yaml = top.map { spec in
            spec.section.map { "\($0):\n  \(spec.name.dropFirst($0.count + 1)): \(values[spec.name]!)" } ?? "\(spec.name): \(values[spec.name]!)"
        }
        .joined(separator: "\n")
        let fromFile = try load(yaml: yaml).get()
        for config in [try load(env: environment).get(), try load(cli: command.keys.values).get(), fromFile] {
            #expect(config.provider.backgroundRefreshEnabled == false)
            #expect(config.provider.maxErrorTokenRefreshDelayMsec == 1234)
            #expect(config.provider.tokenCookiePath == "/web")
            #expect(config.provider.ranges == .current && config.provider.tokenRefreshDelaySec == 120)
            #expect(config[Keys.lifecyclePlatform] == .android)
            #expect(config[Keys.socketMode] == 0o640)
            #expect(config[Keys.socketAllowedUsers] == ["alice", "1000"])
            #expect(config[Keys.socketAllowedGroups] == ["waf-token", "tenant-a"])
            #expect(config[Keys.socketIdleTimeoutSec] == 7 && config[Keys.socketRequestTimeoutSec] == 3 && config[Keys.socketThreads] == 2)
            #expect(config[Keys.tokenServiceClient] == "android" && config[Keys.tokenServiceTimeoutSec] == 5)
            #expect(config[Keys.tokenServiceCAFile] == "/etc/ca.pem")
            #expect(!config[Keys.refreshJitter] && config[Keys.cookieSecure])
            #expect(config[Keys.sinksTokenFile] == "/var/t" && config[Keys.sinksCookieJar] == "/var/j" && config[Keys.stateDirectory] == "/var/s")
            #expect(config[Keys.logLevel] == .error && config[Keys.readinessWaitForToken])
            let proxy = try #require(ProxyConfiguration(config))
            #expect(proxy.listen == .loopback(host: "127.0.0.1", port: 8089) && proxy.upstream.url == "https://api.example.com/v1/")
            #expect(proxy.tokenIn == .header && proxy.replayBufferBytes == 1024 && proxy.tokenWait == .seconds(2))
            #expect(proxy.upstreamTimeout == .seconds(9) && proxy.mode == 0o600 && proxy.threads == 2)
            #expect(proxy.narrowing == AccessLists(users: ["bob"], groups: ["staff"]))
            #expect(config[Keys.lifecycleAllowedUsers] == ["carol"] && config[Keys.lifecycleAllowedGroups] == ["ops"])
            #expect(config[Keys.socketMaxConnections] == 100 && config[Keys.socketMaxConnectionsPerUser] == 10)
            #expect(config[Keys.refreshMinForcedIntervalSec] == 0 && config[Keys.sinksGroup] == "tenant-a")
            #expect(config[Keys.metricsListen]?.description == "0.0.0.0:9464" && config[Keys.authListen]?.description == "127.0.0.1:8090")
            #expect(
                config[Keys.authAllowedUsers] == ["www-data"] && config[Keys.authAllowedGroups] == ["nginx"] && config[Keys.authTokenWaitSec] == 3)
            #expect(config[Keys.egressProxy] == .proxy(host: "proxy.example", port: 3128))
            #expect(config[Keys.egressProxyCredentialsFile] == Self.credentialsFile)
        }
    }

    @Test("CANARY1: canary.url carries the token, so only https to the provider's domain or below, or http to loopback; one sentence each")
    func CANARY1_urlOnlyWhereTheTokenGoes() throws {
        let base = ["applicationIntegrationUrl": url, "domainName": "example.com"]
        func refused(_ canary: String) throws -> [String] { problems(try load(cli: base.merging(["canary.url": canary]) { $1 })) }
        #expect(try refused("https://example.com/health") == [])
        #expect(try refused("https://api.example.com/health") == [])
        #expect(try refused("http://127.0.0.1:8080/health") == [])
        #expect(try refused("https://evil.com/").first?.contains("names evil.com") == true)
        #expect(try refused("https://example.com.evil.com/").first?.contains("canary.url") == true)
        #expect(try refused("http://example.com/").first?.contains("uses http") == true)
        #expect(try refused("https://user:secret@example.com/").first?.contains("canary.url") == true, "no userinfo")
        #expect(try refused("example.com/health").first?.contains("canary.url") == true, "an absolute URL")
    }

    @Test("the proxy: a listener only on a Unix socket or loopback, an upstream only for the token's domain, both or neither")
    func proxyKeys() throws {
        let base = ["applicationIntegrationUrl": url, "domainName": "example.com"]
        func refused(_ values: [String: String]) throws -> [String] { problems(try load(cli: base.merging(values) { $1 })) }
        #expect(
            try refused(["proxy.listen": "0.0.0.0:8089", "proxy.upstream": "https://example.com"]).first?.contains(
                "proxy.listen: \"0.0.0.0:8089\" is neither a Unix socket path nor a loopback address with a port") == true)
        #expect(
            try refused(["proxy.listen": "/run/p.sock"]) == [
                "proxy.upstream: is required with proxy.listen (allowed: an absolute https URL (http only to a loopback host))"
            ])
        #expect(try refused(["proxy.upstream": "https://example.com"]).first?.hasPrefix("proxy.listen: is required with proxy.upstream") == true)
        #expect(try refused(["proxy.listen": "/run/p.sock", "proxy.upstream": "https://evil.com/"]).first?.contains("names evil.com") == true)
        #expect(try refused(["proxy.listen": "/run/p.sock", "proxy.upstream": "http://example.com/"]).first?.contains("uses http") == true)
        // Unset, the proxy's mode is the socket's and it admits the provider's readers (here the
        // socket's); its own lists narrow them, and an empty pair narrows nothing (TENANT-10).
        let inherited = try #require(
            ProxyConfiguration(
                try load(
                    cli: base.merging([
                        "proxy.listen": "/run/p.sock", "proxy.upstream": "https://example.com", "socket.allowedUsers": "alice", "socket.mode": "0600",
                    ]) { $1 }
                ).get()))
        #expect(inherited.readers == AccessLists(users: ["alice"], groups: []) && inherited.narrowing == nil && inherited.mode == 0o600)
        let own = try #require(
            ProxyConfiguration(
                try load(
                    yaml:
                        "applicationIntegrationUrl: \(url)\ndomainName: example.com\nsocket:\n  allowedUsers: [alice]\nproxy:\n  listen: /run/p.sock\n  upstream: https://example.com\n  allowedUsers: []\n"
                ).get()))
        #expect(own.readers == AccessLists(users: ["alice"], groups: []) && own.narrowing == AccessLists(users: [], groups: []))
        #expect(try load(cli: base).get()[Keys.proxyListen] == nil)
    }

    /// A valid value for every key, as text that reads the same in YAML, a variable and an option.
    /// A value for every top-level key: written here, or, for a flag, a number or a choice, made
    /// from its kind (the bound or the last choice), so that a new key of those kinds needs no line here.
    static var validValues: [String: String] {
        var values = writtenValues
        for spec in Keys.all where spec.topLevel && values[spec.name] == nil {
            switch spec.kind {
            case .bool: values[spec.name] = "true"
            case .integer(let range): values[spec.name] = String(range.upperBound)
            case .choice(let choices): values[spec.name] = choices.last
            default: continue
            }
        }
        return values
    }

    /// A credentials file the loader accepts (it reads it: EGRESS-3).
    static let credentialsFile: String = {
        let path = scratchPath("waf-proxy-credentials").path
        _ = FileManager.default.createFile(atPath: path, contents: Data("alice:secret\n".utf8), attributes: [.posixPermissions: 0o600])
        return path
    }()

    static let writtenValues: [String: String] = [
        "applicationIntegrationUrl": url, "domainName": "example.com", "backgroundRefreshEnabled": "false",
        "maxErrorTokenRefreshDelayMsec": "1234", "maxRetryCount": "4", "setTokenCookie": "false", "tokenCookiePath": "/web",
        "tokenRefreshDelaySec": "120", "ranges": "current", "lifecycle.platform": "android", "socket.path": "/x/s.sock",
        "socket.mode": "\"0640\"", "socket.allowedUsers": "alice,1000", "socket.allowedGroups": "waf-token,tenant-a", "socket.idleTimeoutSec": "7",
        "socket.requestTimeoutSec": "3", "socket.threads": "2", "tokenService.client": "android", "tokenService.timeoutSec": "5",
        "tokenService.caFile": "/etc/ca.pem", "refresh.jitter": "false", "cookie.secure": "true", "sinks.tokenFile": "/var/t",
        "sinks.cookieJar": "/var/j", "stateDirectory": "/var/s", "log.level": "error", "readiness.waitForToken": "true",
        "proxy.listen": "127.0.0.1:8089", "proxy.upstream": "https://api.example.com/v1/", "proxy.tokenIn": "header",
        "proxy.replayBufferBytes": "1024", "proxy.tokenWaitSec": "2", "proxy.upstreamTimeoutSec": "9", "proxy.mode": "\"0600\"",
        "proxy.allowedUsers": "bob", "proxy.allowedGroups": "staff", "proxy.threads": "2", "lifecycle.allowedUsers": "carol",
        "lifecycle.allowedGroups": "ops", "socket.maxConnections": "100", "socket.maxConnectionsPerUser": "10",
        "refresh.minForcedIntervalSec": "0", "sinks.group": "tenant-a", "metrics.listen": "0.0.0.0:9464", "auth.listen": "127.0.0.1:8090",
        "auth.allowedUsers": "www-data", "auth.allowedGroups": "nginx", "auth.tokenWaitSec": "3", "auth.selectByForwardedHost": "true",
        "limits.bufferedBytes": "2097152", "sinks.onToken": "[{reload: app.service}]", "sinks.onTokenUsers": "alice",
        "sinks.onTokenTimeoutSec": "20", "canary.url": "https://api.example.com/health", "canary.intervalSec": "30", "canary.method": "HEAD",
        "canary.affectsReadiness": "false", "egress.proxy": "http://proxy.example:3128", "egress.proxyCredentialsFile": credentialsFile,
    ].mapValues { $0.hasPrefix("\"0") ? String($0.dropFirst().dropLast()) : $0 }

    @Test("CFG-9 for the daemon: a value of the wrong shape is refused for every key, in the file, never replaced by a default")
    func CFG9_wrongShapesInTheFile() throws {
        for spec in Keys.all {
            var shapes = ["{a: 1}": "is a map, not a single value", "[[1]]": "not a"]
            switch spec.kind {
            case .list: shapes = ["{a: 1}": "is a map, not a list", "[[x]]": "holds a list, not a user or group name or id"]
            case .bool: shapes["5"] = "is a number, not a boolean"; shapes["\"true\""] = "is a string, not a boolean"; shapes["null"] = "is null"
            case .integer:
                shapes["\"5\""] = "is a string, not an integer"; shapes["true"] = "is a boolean, not an integer"; shapes["null"] = "is null"
            case .absolutePath, .socketPath, .choice: shapes["5"] = "is a number, not a string"; shapes["true"] = "is a boolean, not a string"
            case .octalMode: shapes["true"] = "is a boolean, not a string"
            case .actions:
                shapes = ["{a: 1}": "is a map, not a list of actions", "[[1]]": "item 1 is not one of", "[{run: {a: 1}}]": "run is a map"]
            case .provider(let key):
                shapes["null"] = "is null"
                switch key {
                case .backgroundRefreshEnabled, .setTokenCookie:
                    shapes["5"] = "is a number, not a boolean"; shapes["\"true\""] = "is a string, not a boolean"
                case .maxRetryCount, .maxErrorTokenRefreshDelayMsec, .tokenRefreshDelaySec:
                    shapes["\"5\""] = "is a string, not an integer"; shapes["true"] = "is a boolean, not an integer"
                default: shapes["5"] = "is a number, not a string"; shapes["true"] = "is a boolean, not a string"
                }
            default: break
            }
            for (value, problem) in shapes {
                var line = spec.section.map { "\($0):\n  \(spec.name.dropFirst($0.count + 1)): \(value)" } ?? "\(spec.name): \(value)"
                var shown = spec.name
                if !spec.topLevel {
                    // A key of providers' entries only: in one.
                    line = "providers:\n  pay:\n    domainName: pay.example.com\n    " + line.replacing("\n", with: "\n    ")
                    shown = "providers.pay.\(spec.name)"
                }
                let others = required.split(separator: "\n").filter { !$0.hasPrefix(spec.name + ":") }.joined(separator: "\n")
                let text = [others, line].joined(separator: "\n")
                let found = problems(try load(yaml: text)).filter { $0.hasPrefix("\(shown): ") }
                #expect(found.count == 1 && found[0].contains(problem), "\(shown): \(value) → \(found)")
            }
        }
    }

    @Test("CFG-9 for the daemon: wrong values name key, value, range and where the value came from")
    func CFG9_errorsNameKeyValueRangeAndOrigin() throws {
        let path = try configFile("applicationIntegrationUrl: \(url)\ndomainName: co.uk\nsocket:\n  mode: \"0999\"\n")
        let result = ConfigurationLoader.load(
            ConfigurationSources(
                commandLine: ["tokenRefreshDelaySec": "60"],
                environment: ["WAF_TOKEND_MAX_RETRY_COUNT": "eleven", "WAF_TOKEND_LOG_LEVEL": "loud"], file: path))
        #expect(
            problems(result) == [
                "domainName: \"co.uk\" is a public suffix by the Public Suffix List (from domainName in \(path)) (allowed: a bare host name or IP address (no scheme, port, path or query) that is not a public suffix)",
                "maxRetryCount: \"eleven\" is not an integer (from WAF_TOKEND_MAX_RETRY_COUNT) (allowed: an integer 0…10)",
                "tokenRefreshDelaySec: 60 is out of range for ranges: seed (from --token-refresh-delay-sec) (allowed: an integer 300…600)",
                "socket.mode: \"0999\" is not an octal mode (from socket.mode in \(path)) (allowed: an octal file mode such as \"0660\" (0000…0777))",
                "log.level: \"loud\" is not allowed (from WAF_TOKEND_LOG_LEVEL) (allowed: one of trace, debug, info, notice, warning, error, critical)",
            ])
    }

    @Test("a typo in the file is refused, not ignored; a missing --config file and bad YAML are one clear sentence each")
    func fileProblems() throws {
        let typo = try load(yaml: "\(required)tokenRefreshDelay: 300\nsocket:\n  pth: /x\n")
        #expect(problems(typo).count == 2)
        #expect(problems(typo).contains { $0.hasPrefix("socket.pth: is not a configuration key") })
        #expect(problems(typo).contains { $0.hasPrefix("tokenRefreshDelay: is not a configuration key") })

        let missing = ConfigurationLoader.load(ConfigurationSources(file: "/nonexistent/waf.yaml"))
        #expect(
            problems(missing) == [
                "--config: \"/nonexistent/waf.yaml\" cannot be used: it does not exist (allowed: a readable YAML file of at most 1 MiB)"
            ])
        let broken = problems(try load(yaml: "domainName: [unclosed\n"))
        #expect(broken.count == 1 && broken[0].contains("cannot be used: it is not valid YAML:") && broken[0].contains("line"))
        let directory = ConfigurationLoader.load(ConfigurationSources(file: "/tmp"))
        #expect(
            problems(directory) == [
                "--config: \"/tmp\" cannot be used: it is a directory, not a file (allowed: a readable YAML file of at most 1 MiB)"
            ])
        let notAMap = problems(try load(yaml: "- a\n- b\n"))
        #expect(notAMap.first?.contains("its top level is a list, not a map of keys") == true)
        let twice = problems(try load(yaml: "\(required)maxRetryCount: 1\nmaxRetryCount: 2\n"))
        #expect(twice.contains { $0.hasPrefix("maxRetryCount: is given twice") })
        #expect(problems(try load()).map { String($0.prefix(30)) } == ["applicationIntegrationUrl: is ", "domainName: is required (allow"])
    }

    @Test("the file is read in bounded time and memory: an alias bomb, a huge file and a deep one are refused at once")
    func boundedReading() throws {
        var bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
        for level in 1...8 { bomb.append("a\(level): &a\(level) [" + Array(repeating: "*a\(level - 1)", count: 9).joined(separator: ", ") + "]") }
        let clock = ContinuousClock()
        let started = clock.now
        let bombed = problems(try load(yaml: bomb.joined(separator: "\n")))
        #expect(bombed.count == 1 && bombed[0].contains("more than 10000 values"), "\(bombed)")
        let huge = problems(try load(yaml: String(repeating: "unknownKey: 1\n", count: 80_000)))
        #expect(huge.count == 1 && huge[0].contains("larger than 1 MiB"))
        let many = problems(try load(yaml: (0..<40_000).map { "k\($0): 1" }.joined(separator: "\n")))
        #expect(many.count == 1 && many[0].contains("more than 10000 values"))
        let deep = problems(try load(yaml: String(repeating: "[", count: 200) + String(repeating: "]", count: 200)))
        #expect(deep.count == 1 && (deep[0].contains("deeper than") || deep[0].contains("not valid YAML")), "\(deep)")
        #expect(clock.now - started < .seconds(10), "bounded")
    }

    @Test("limits hold as the file is parsed: nesting that never closes, up to the 1 MiB limit, is refused in well under a second")
    func hostileNestingRefusedAtOnce() throws {
        // 50,000 unclosed `[` kept libyaml busy 12.6 s when the limits were checked after it had parsed.
        let hostile = [
            String(repeating: "[", count: 50_000), String(repeating: "[", count: (1 << 20) - 1),
            String(repeating: "{a: ", count: 40_000), String(repeating: "- ", count: 20_000) + "x",
        ]
        for text in hostile {
            let clock = ContinuousClock()
            let started = clock.now
            let refused = problems(try load(yaml: text))
            let took = clock.now - started
            #expect(refused.count == 1 && refused[0].contains("nests deeper than 32 levels"), "\(refused)")
            // Measured: about 10 ms each; a loaded machine gets a generous margin, not seconds.
            #expect(took < .seconds(1), "\(text.prefix(8))…: \(took)")
        }
    }

    @Test("a socket path longer than a Unix socket address holds is refused at configuration time, naming the key and the limit")
    func socketPathTooLong() async throws {
        let fits = "/" + String(repeating: "s", count: 106)
        #expect(problems(try load(cli: ["socket.path": fits, "proxy.listen": fits + ".p"], yaml: required)).count == 1, "107 bytes fit")
        let refused = problems(try load(cli: ["socket.path": fits + "x", "proxy.listen": fits + "x"], yaml: required))
        #expect(refused.count == 2, "\(refused)")
        #expect(
            refused.first?.hasPrefix("socket.path: ") == true
                && refused.first?.contains("is 108 bytes long; a Unix socket address holds at most 107") == true)
        #expect(refused.last?.hasPrefix("proxy.listen: ") == true && refused.last?.contains("at most 107") == true)
        // --check-config finds it, and the daemon exits 78 before it binds anything.
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        let arguments = ["--config", "/dev/null", "--application-integration-url", url, "--domain-name", "example.com", "--socket-path", fits + "x"]
        for extra in [["--check-config"], []] {
            let result = try await run(daemon, extra + arguments)
            #expect(result.status == 78 && result.stderr.contains("socket.path"), "\(extra): \(result.status) \(result.stderr)")
        }
    }

    @Test("a configuration from a pipe, as `--config <(generate)` and systemd credentials give it")
    func configurationFromAPipe() throws {
        var descriptors: [Int32] = [0, 0]
        #expect(pipe(&descriptors) == 0)
        let text = Array((required + "maxRetryCount: 3\n").utf8)
        #expect(write(descriptors[1], text, text.count) == text.count)
        close(descriptors[1])
        defer { close(descriptors[0]) }
        let config = try ConfigurationLoader.load(ConfigurationSources(file: "/dev/fd/\(descriptors[0])")).get()
        #expect(config.provider.maxRetryCount == 3)
    }

    @Test("empty means not set for an optional key (in the file, or an empty variable), so lower sources still count")
    func emptyIsUnset() throws {
        let config = try load(
            env: ["WAF_TOKEND_SINKS_TOKEN_FILE": "", "STATE_DIRECTORY": "/var/lib/waf-tokend"],
            yaml: "\(required)stateDirectory:\nsinks:\n  tokenFile:\n"
        ).get()
        #expect(config[Keys.sinksTokenFile] == nil)
        #expect(config[Keys.stateDirectory] == "/var/lib/waf-tokend", "systemd's STATE_DIRECTORY when nothing sets it")
    }

    @Test("the effective configuration reads back as the same configuration")
    func effectiveConfigurationRoundTrips() throws {
        let first = try load(cli: [
            "applicationIntegrationUrl": url, "domainName": "example.com", "socket.allowedUsers": "a,b", "stateDirectory": "/var/lib/x",
        ]).get()
        let second = try load(yaml: first.effectiveYAML).get()
        #expect(second.effectiveYAML == first.effectiveYAML)
        #expect(first.effectiveYAML.contains("socket:\n  path: /run/waf-tokend/token.sock\n  mode: \"0660\"\n  allowedUsers: [a, b]\n"))
        #expect(first.effectiveYAML.contains("sinks:\n  # tokenFile: (not set)\n"))
    }

    @Test("names and paths that YAML reads otherwise are quoted in the effective configuration (fuzz-config's finding)")
    func effectiveConfigurationQuotes() throws {
        let groups = ##"["Y]", "true", "x:y", "#c", "-x", "12", "é\a\"\\"]"##
        // The file's group among the readers' groups (TENANT-10).
        let first = try load(yaml: "\(required)socket:\n  allowedGroups: \(groups)\nsinks:\n  tokenFile: \"/tmp/a: b #c\"\n  group: \"12\"\n").get()
        #expect(first[Keys.socketAllowedGroups] == ["Y]", "true", "x:y", "#c", "-x", "12", "é\u{7}\"\\"])
        let second = try load(yaml: first.effectiveYAML).get()
        #expect(second.effectiveYAML == first.effectiveYAML)
        #expect(second[Keys.sinksTokenFile] == "/tmp/a: b #c")
        #expect(first.effectiveYAML.contains("  path: /run/waf-tokend/token.sock\n"), "a plain path stays plain")
    }

    @Test("the documented example, config/waf-tokend.yaml, is valid and says what the defaults are")
    func exampleConfigurationIsValid() throws {
        let example = repositoryDirectory.appendingPathComponent("config/waf-tokend.yaml").path
        let config = try ConfigurationLoader.load(ConfigurationSources(file: example)).get()
        let defaults = try load(cli: ["applicationIntegrationUrl": url, "domainName": "example.com"]).get()
        #expect(config.effectiveYAML == defaults.effectiveYAML)
    }

    @Test("docs/configuration.md's reference is the key table's, word for word")
    func referenceIsTheTable() throws {
        let page = try String(contentsOf: repositoryDirectory.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        #expect(
            page.contains(ConfigurationReference.markdown),
            "docs/configuration.md's reference differs from the key table: run scripts/update-reference.sh"
        )
    }
}
