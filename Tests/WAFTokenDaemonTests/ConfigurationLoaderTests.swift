import ArgumentParser
import Foundation
import Testing
import WAFTestSupport
import WAFTokenCore
@testable import WAFTokenDaemon

private let url = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"

private func file(_ text: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("waf-config-\(UUID().uuidString).yaml").path
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

private func load(cli: [String: String] = [:], env: [String: String] = [:], yaml: String? = nil) async throws -> Result<DaemonConfiguration, WAFConfigurationError> {
    await ConfigurationLoader.load(ConfigurationSources(commandLine: cli, environment: env, file: try yaml.map(file) ?? "/dev/null"))
}

private func problems(_ result: Result<DaemonConfiguration, WAFConfigurationError>) -> [String] {
    if case .failure(let error) = result { return error.issues.map(\.description) }
    return []
}

@Suite("Daemon configuration")
struct ConfigurationLoaderTests {
    @Test("precedence: command line > environment > file > default")
    func precedence() async throws {
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
        let config = try await load(
            cli: ["domainName": "cli.example.com", "socket.path": "/cli/token.sock"],
            env: ["WAF_TOKEND_DOMAIN_NAME": "env.example.com", "WAF_TOKEND_MAX_RETRY_COUNT": "7", "WAF_TOKEND_SOCKET_PATH": "/env/token.sock"],
            yaml: yaml
        ).get()
        #expect(config.provider.domainName == "cli.example.com")
        #expect(config.socketPath == "/cli/token.sock")
        #expect(config.provider.maxRetryCount == 7)
        #expect(config.provider.tokenRefreshDelaySec == 400)
        #expect(config.socketMode == 0o600)
        #expect(config.logLevel == .debug)
        #expect(config.provider.maxErrorTokenRefreshDelayMsec == 5000)
        #expect(config.lifecyclePlatform == .ios)
        #expect(config.tokenServiceTimeoutSeconds == 10)
        #expect(config.refreshJitter)
    }

    @Test("every key is read from its documented environment variable and command-line option")
    func everyKeyHasItsNames() async throws {
        let values: [String: String] = [
            "applicationIntegrationUrl": url, "domainName": "example.com", "backgroundRefreshEnabled": "false",
            "maxErrorTokenRefreshDelayMsec": "1234", "maxRetryCount": "4", "setTokenCookie": "false", "tokenCookiePath": "/web",
            "tokenRefreshDelaySec": "321", "lifecycle.platform": "android", "socket.path": "/x/s.sock", "socket.mode": "0640",
            "socket.allowedUsers": "alice,1000", "socket.allowedGroups": "waf-token", "socket.idleTimeoutSec": "7",
            "socket.requestTimeoutSec": "3", "socket.threads": "2", "tokenService.client": "android", "tokenService.timeoutSec": "5",
            "tokenService.caFile": "/etc/ca.pem", "refresh.jitter": "false", "cookie.secure": "true",
            "sinks.tokenFile": "/var/t", "sinks.cookieJar": "/var/j", "stateDirectory": "/var/s", "log.level": "error",
            "readiness.waitForToken": "true",
        ]
        #expect(Set(values.keys) == Set(WAFConfigurationKey.allCases.map(\.rawValue) + DaemonKey.allCases.map(\.rawValue)))
        let environment = Dictionary(uniqueKeysWithValues: values.map { (DaemonKey.environmentName($0.key), $0.value) })
        #expect(environment["WAF_TOKEND_DOMAIN_NAME"] == "example.com")
        #expect(environment["WAF_TOKEND_SOCKET_PATH"] == "/x/s.sock")
        #expect(environment["WAF_TOKEND_TOKEN_SERVICE_CA_FILE"] == "/etc/ca.pem")
        let command = try WAFTokendCommand.parse(values.flatMap { [DaemonKey.optionName($0.key), $0.value] })
        #expect(command.commandLineValues == values)

        for config in [try await load(env: environment).get(), try await load(cli: command.commandLineValues).get()] {
            #expect(config.provider.backgroundRefreshEnabled == false)
            #expect(config.provider.maxErrorTokenRefreshDelayMsec == 1234)
            #expect(config.provider.tokenCookiePath == "/web")
            #expect(config.lifecyclePlatform == .android)
            #expect(config.socketMode == 0o640)
            #expect(config.allowedUsers == ["alice", "1000"])
            #expect(config.allowedGroups == ["waf-token"])
            #expect(config.idleTimeoutSeconds == 7 && config.requestTimeoutSeconds == 3 && config.socketThreads == 2)
            #expect(config.tokenServiceClient == "android" && config.tokenServiceTimeoutSeconds == 5)
            #expect(config.tokenServiceCAFile == "/etc/ca.pem")
            #expect(!config.refreshJitter && config.cookieSecure)
            #expect(config.tokenFile == "/var/t" && config.cookieJar == "/var/j" && config.stateDirectory == "/var/s")
            #expect(config.logLevel == .error && config.waitForTokenBeforeReady)
        }
    }

    @Test("CFG-9 for the daemon: wrong values name key, value, range and where the value came from")
    func CFG9_errorsNameKeyValueRangeAndOrigin() async throws {
        let path = try file("applicationIntegrationUrl: \(url)\ndomainName: co.uk\nsocket:\n  mode: \"0999\"\n")
        let result = await ConfigurationLoader.load(ConfigurationSources(
            commandLine: ["tokenRefreshDelaySec": "60"],
            environment: ["WAF_TOKEND_MAX_RETRY_COUNT": "eleven", "WAF_TOKEND_LOG_LEVEL": "loud"], file: path))
        #expect(problems(result) == [
            "domainName: \"co.uk\" is a public suffix by the Public Suffix List (from domainName in \(path)) (allowed: a bare host name (no scheme, port, path or query) that is not a public suffix)",
            "maxRetryCount: \"eleven\" is not an integer (from WAF_TOKEND_MAX_RETRY_COUNT) (allowed: an integer 0…10)",
            "tokenRefreshDelaySec: 60 is out of range (from --token-refresh-delay-sec) (allowed: an integer 300…600)",
            "socket.mode: \"0999\" is not an octal mode (from socket.mode in \(path)) (allowed: an octal file mode such as \"0660\" (0000…0777))",
            "log.level: \"loud\" is not allowed (from WAF_TOKEND_LOG_LEVEL) (allowed: one of trace, debug, info, notice, warning, error, critical)",
        ])
    }

    @Test("a typo in the file is refused, not ignored; a missing --config file and bad YAML are errors")
    func fileProblems() async throws {
        let typo = try await load(yaml: "applicationIntegrationUrl: \(url)\ndomainName: example.com\ntokenRefreshDelay: 300\nsocket:\n  pth: /x\n")
        #expect(problems(typo).count == 2)
        #expect(problems(typo).first?.hasPrefix("socket.pth: is not a configuration key") == true)
        #expect(problems(typo).last?.hasPrefix("tokenRefreshDelay: is not a configuration key") == true)

        let missing = await ConfigurationLoader.load(ConfigurationSources(file: "/nonexistent/waf.yaml"))
        #expect(problems(missing).first?.hasPrefix("--config: \"/nonexistent/waf.yaml\" cannot be read") == true)
        let broken = try await load(yaml: "domainName: [unclosed\n")
        #expect(problems(broken).first?.contains("cannot be read") == true)
        let required = try await load()
        #expect(problems(required).map { String($0.prefix(30)) } == ["applicationIntegrationUrl: is ", "domainName: is required (allow"])
    }

    @Test("the effective configuration reads back as the same configuration")
    func effectiveConfigurationRoundTrips() async throws {
        let first = try await load(cli: ["applicationIntegrationUrl": url, "domainName": "example.com", "socket.allowedUsers": "a,b", "stateDirectory": "/var/lib/x"]).get()
        let path = try file(first.effectiveYAML)
        let second = try await ConfigurationLoader.load(ConfigurationSources(file: path)).get()
        #expect(second.effectiveYAML == first.effectiveYAML)
        #expect(first.effectiveYAML.contains("socket:\n  path: /run/waf-tokend/token.sock\n  mode: \"0660\"\n  allowedUsers: [a, b]\n"))
        #expect(first.effectiveYAML.contains("sinks:\n  # tokenFile: (not set)\n"))
    }

    @Test("the documented example, config/waf-tokend.yaml, is valid and says what the defaults are")
    func exampleConfigurationIsValid() async throws {
        let example = repositoryDirectory.appendingPathComponent("config/waf-tokend.yaml").path
        let config = try await ConfigurationLoader.load(ConfigurationSources(file: example)).get()
        let defaults = try await load(cli: ["applicationIntegrationUrl": url, "domainName": "example.com"]).get()
        #expect(config.allowedGroups.isEmpty && config.allowedUsers.isEmpty)
        #expect(config.socketPath == defaults.socketPath && config.socketMode == defaults.socketMode)
        #expect(config.provider == defaults.provider)
        #expect(config.tokenFile == nil && config.stateDirectory == nil)
    }

    @Test("the README's configuration reference names every key")
    func readmeNamesEveryKey() throws {
        let readme = try String(contentsOf: repositoryDirectory.appendingPathComponent("README.md"), encoding: .utf8)
        for key in WAFConfigurationKey.allCases.map(\.rawValue) + DaemonKey.allCases.map(\.rawValue) {
            #expect(readme.contains("| `\(key)` |"), "README lacks \(key)")
        }
    }

    @Test("systemd's STATE_DIRECTORY is the state directory when none is configured")
    func stateDirectoryFromSystemd() async throws {
        let config = try await load(cli: ["applicationIntegrationUrl": url, "domainName": "example.com"], env: ["STATE_DIRECTORY": "/var/lib/waf-tokend"]).get()
        #expect(config.stateDirectory == "/var/lib/waf-tokend")
    }

    @Test("Accept negotiation: explicit beats wildcard; quality decides")
    func acceptNegotiation() {
        #expect(AcceptNegotiation.prefersPlainText("text/plain"))
        #expect(!AcceptNegotiation.prefersPlainText("*/*"))
        #expect(!AcceptNegotiation.prefersPlainText(nil))
        #expect(!AcceptNegotiation.prefersPlainText("application/json, text/plain;q=0.5"))
        #expect(AcceptNegotiation.prefersPlainText("text/*, application/json;q=0.2"))
        #expect(!AcceptNegotiation.prefersJSON("*/*"))
        #expect(AcceptNegotiation.prefersJSON("application/json"))
        #expect(!AcceptNegotiation.prefersJSON("text/plain, application/json;q=0"))
    }

    @Test("the hot path answers only a plain GET /v1/token and steps aside for anything else")
    func hotRequestRecognition() {
        func decide(_ head: String) -> Bool? {
            Array(head.utf8).withUnsafeBytes { bytes in
                HotRequest.headLength(in: bytes).flatMap { HotRequest.prefersPlainText(UnsafeRawBufferPointer(rebasing: bytes[0..<$0])) }
            }
        }
        #expect(decide("GET /v1/token HTTP/1.1\r\nHost: localhost\r\n\r\n") == false)
        #expect(decide("GET /v1/token HTTP/1.1\r\nhost: x\r\nAccept: text/plain\r\n\r\n") == true)
        #expect(decide("GET /v1/token HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nUser-Agent: h2load\r\n\r\n") == false)
        #expect(decide("GET /v1/token HTTP/1.1\r\n\r\n") == false)
        #expect(decide("GET /v1/token?wait=1 HTTP/1.1\r\nHost: x\r\n\r\n") == nil)
        #expect(decide("GET /v1/token HTTP/1.0\r\nHost: x\r\n\r\n") == nil)
        #expect(decide("POST /v1/token HTTP/1.1\r\nHost: x\r\n\r\n") == nil)
        #expect(decide("GET /v1/token HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") == nil)
        #expect(decide("GET /v1/token HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n") == nil)
        #expect(decide("GET /v1/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n") == nil)
        #expect(decide("GET /v1/token HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n") == nil)
        #expect(decide("GET /v1/token HTTP/1.1\r\nBad Name: x\r\n\r\n") == nil)
        #expect(decide("GET /v1/token HTTP/1.1\r\nHost: x\r\n") == nil, "incomplete")
    }
}
