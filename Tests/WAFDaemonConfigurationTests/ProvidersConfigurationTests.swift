import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonConfiguration
@testable import WAFTokenDaemon

private let api = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"
private let pay = "https://abcdefabcdef.eu-west-1.sdk.awswaf.com/abcdefabcdef/abcdefabcdef/"

private func load(
    _ yaml: String, cli: [String: String] = [:], env: [String: String] = [:]
) throws -> Result<DaemonConfiguration, WAFConfigurationError> {
    ConfigurationLoader.load(ConfigurationSources(commandLine: cli, environment: env, file: try configFile(yaml)))
}

@Suite("Several providers: configuration", .offPool)
struct ProvidersConfigurationTests {
    static let two = """
        applicationIntegrationUrl: \(api)
        domainName: api.example.com
        maxRetryCount: 2
        sinks:
          tokenFile: /var/lib/t/api
        providers:
          pay:
            applicationIntegrationUrl: \(pay)
            domainName: pay.example.com
            tokenRefreshDelaySec: 400
            sinks:
              tokenFile: /var/lib/t/pay
              group: payments
            allowedGroups: [payments]
        """

    @Test(
        "MULTI-1: the top-level identity is provider default; an entry under providers is another, its SDK keys inherited from the top level, its own keys its own"
    )
    func MULTI1_providersAndInheritance() throws {
        let config = try load(Self.two).get()
        #expect(config.providers.map(\.name) == ["default", "pay"])
        let (first, second) = (config.providers[0], config.providers[1])
        #expect(first.domainName == "api.example.com" && first[Keys.sinksTokenFile] == "/var/lib/t/api")
        #expect(second.domainName == "pay.example.com" && second.configuration.tokenRefreshDelaySec == 400)
        #expect(second.configuration.maxRetryCount == 2, "an SDK key it leaves out is the top level's")
        #expect(second[Keys.sinksTokenFile] == "/var/lib/t/pay" && second[Keys.providerAllowedGroups] == ["payments"])
        #expect(second[Keys.proxyListen] == nil, "its own keys are never another's")
        // Without a top-level identity there is no default; with neither it nor providers, nothing.
        let named = try load("domainName: x.example.com\nproviders:\n  a:\n    applicationIntegrationUrl: \(api)\n").get()
        #expect(named.providers.map(\.name) == ["a"] && named.providers[0].domainName == "x.example.com")
        let none = problems(try load("maxRetryCount: 2\n"))
        #expect(none.contains { $0.hasPrefix("applicationIntegrationUrl: is required") } && none.contains { $0.hasPrefix("domainName: is required") })
    }

    @Test("MULTI-1: options and variables reach provider keys, above the file, and can name a provider of their own")
    func MULTI1_optionsAndVariables() throws {
        let env = [
            "WAF_TOKEND_PROVIDERS_PAY_TOKEN_REFRESH_DELAY_SEC": "500", "WAF_TOKEND_PROVIDERS_SHOP_EU_DOMAIN_NAME": "shop.example.com",
            "WAF_TOKEND_PROVIDERS_SHOP_EU_APPLICATION_INTEGRATION_URL": pay.replacingOccurrences(
                of: "abcdefabcdef/abcdefabcdef", with: "aaaaaaaaaaaa/aaaaaaaaaaaa"),
        ]
        let cli = ["providers.pay.tokenRefreshDelaySec": "600", "providers.pay.sinks.tokenFile": "/run/pay"]
        let config = try load(Self.two, cli: cli, env: env).get()
        #expect(config.providers.map(\.name) == ["default", "pay", "shop-eu"])
        #expect(config.providers[1].configuration.tokenRefreshDelaySec == 600, "command line > environment > file")
        #expect(config.providers[1][Keys.sinksTokenFile] == "/run/pay")
        #expect(config.providers[2].domainName == "shop.example.com")
        let fromEnv = try load(Self.two, env: env).get()
        #expect(fromEnv.providers[1].configuration.tokenRefreshDelaySec == 500)
        // The table's own names for them.
        #expect(Keys.sinksTokenFile.spec.environmentName(provider: "shop-eu") == "WAF_TOKEND_PROVIDERS_SHOP_EU_SINKS_TOKEN_FILE")
        #expect(Keys.sinksTokenFile.spec.optionName(provider: "pay") == "--providers.pay.sinks.tokenFile")
        let parsed = WAFTokendCommand.extractProviderOptions([
            "--providers.pay.domainName", "p.example.com", "--providers.pay.maxRetryCount=4", "--log-level", "debug",
        ])
        #expect(parsed.rest == ["--log-level", "debug"])
        #expect(parsed.options == ["providers.pay.domainName": "p.example.com", "providers.pay.maxRetryCount": "4"])
    }

    @Test(
        "MULTI-1: a bad name, an entry that is no map, an unknown key, one identity twice, one file or address twice, providers.default beside a top-level identity: each an error naming the key",
        arguments: [
            ("providers:\n  Pay:\n    domainName: p.example.com\n", "providers.Pay: is not a provider name"),
            ("providers:\n  -pay:\n    domainName: p.example.com\n", "providers.-pay: is not a provider name"),
            ("providers:\n  \(String(repeating: "a", count: 33)):\n    domainName: p.example.com\n", "is not a provider name"),
            ("providers: [a, b]\n", "providers: is a list, not a map of names to providers"),
            ("providers:\n  pay: true\n", "providers.pay: is a boolean, not a map of keys"),
            ("providers:\n  pay:\n    domainName: p.example.com\n    socket:\n      path: /x\n", "providers.pay.socket: is not a configuration key"),
            (
                "providers:\n  pay:\n    domainName: p.example.com\n    proxy:\n      lissen: /x\n",
                "providers.pay.proxy.lissen: is not a configuration key"
            ),
            (
                "providers:\n  pay:\n    domainName: API.example.com\n",
                "providers.pay.domainName: \"api.example.com\" gives provider pay the identity of provider default"
            ),
            (
                "providers:\n  pay:\n    domainName: p.example.com\n    sinks:\n      tokenFile: /var/lib/t/api\n",
                "providers.pay.sinks.tokenFile: \"/var/lib/t/api\" is provider default's token file too"
            ),
            (
                "providers:\n  default:\n    domainName: p.example.com\n",
                "providers.default: is the provider the top-level applicationIntegrationUrl and domainName make"
            ),
            ("providers:\n  pay:\n    domainName: co.uk\n", "providers.pay.domainName: \"co.uk\" is a public suffix"),
            ("providers:\n  pay:\n    domainName: p.example.com\n    maxRetryCount: 11\n", "providers.pay.maxRetryCount: 11 is out of range"),
            ("allowedUsers: [alice]\n", "allowedUsers: is not a configuration key"),
        ])
    func MULTI1_badProviders(text: String, problem: String) throws {
        let top = "applicationIntegrationUrl: \(api)\ndomainName: api.example.com\nsinks:\n  tokenFile: /var/lib/t/api\n"
        let found = problems(try load(top + text))
        #expect(found.contains { $0.contains(problem) }, "\(found)")
    }

    @Test("MULTI-1: a variable or option for no provider key is refused, naming it")
    func MULTI1_unknownProviderVariables() throws {
        let top = "applicationIntegrationUrl: \(api)\ndomainName: api.example.com\n"
        #expect(
            problems(try load(top, env: ["WAF_TOKEND_PROVIDERS_PAY_SOCKET_PATH": "/x"])).contains {
                $0.hasPrefix("WAF_TOKEND_PROVIDERS_PAY_SOCKET_PATH: names no key a provider has")
            })
        #expect(
            problems(try load(top, cli: ["providers.pay.socket.path": "/x"])).contains {
                $0.hasPrefix("--providers.pay.socket.path: names no key a provider has")
            })
    }

    @Test("MULTI-1: --check-config shows every provider's keys in force, and reads back as the same providers")
    func MULTI1_effectiveConfiguration() async throws {
        let config = try load(Self.two).get()
        let yaml = config.effectiveYAML
        #expect(yaml.contains("providers:\n  pay:\n    applicationIntegrationUrl: \(pay)\n    domainName: pay.example.com\n"))
        #expect(yaml.contains("    maxRetryCount: 2\n"), "the inherited value, written out")
        let again = try load(yaml).get()
        #expect(again.providers.map(\.name) == config.providers.map(\.name))
        #expect(again.providers.map(\.configuration) == config.providers.map(\.configuration))
        #expect(again.effectiveYAML == yaml, "the same keys in force")
        let daemon = productsDirectory.appendingPathComponent("waf-tokend").path
        let checked = try await run(daemon, ["--check-config", "--config", try configFile(Self.two), "--providers.pay.maxRetryCount", "7"])
        #expect(checked.status == 0 && checked.stdout.contains("  pay:\n") && checked.stdout.contains("    maxRetryCount: 7\n"), "\(checked.stderr)")
    }
}
