import Foundation
import Testing
import WAFTestSupport
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonConfiguration

#if canImport(Glibc)
import Glibc
#endif

private let service = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"

private func load(
    _ cli: [String: String] = [:], env: [String: String] = [:], yaml: String = ""
) throws -> Result<
    DaemonConfiguration, WAFConfigurationError
> {
    let file = try configFile("applicationIntegrationUrl: \(service)\ndomainName: example.com\n" + yaml)
    return ConfigurationLoader.load(ConfigurationSources(commandLine: cli, environment: env, file: file))
}

/// Which way out each provider's requests take (EGRESS-1): the key, the environment as curl reads
/// it, and what `--check-config` and the start line say; the programs themselves are in the daemon's
/// tests (squid).
@Suite("Egress: the setting and the environment", .offPool)
struct EgressConfigurationTests {
    @Test("EGRESS1: egress.proxy takes direct or http://HOST:PORT, and refuses credentials, https and a missing port in one sentence")
    func EGRESS1_parse() {
        #expect(Egress.parseProxy("direct") == .success(.direct))
        #expect(Egress.parseProxy("http://Proxy.Corp:3128") == .success(.proxy(host: "proxy.corp", port: 3128)))
        #expect(Egress.parseProxy("http://[fd00::1]:8080/") == .success(.proxy(host: "fd00::1", port: 8080)))
        for (text, words) in [
            ("http://alice:secret@proxy:3128", "egress.proxyCredentialsFile only"), ("https://proxy:3128", "neither direct nor"),
            ("socks5://proxy:1080", "neither direct nor"), ("http://proxy", "not http://HOST:PORT"), ("http://proxy:0", "not http://HOST:PORT"),
            ("http://:3128", "names no host"),
        ] {
            guard case .failure(let problem) = Egress.parseProxy(text) else {
                Issue.record("\(text) was taken")
                continue
            }
            #expect(problem.description.contains(words), "\(text): \(problem)")
            #expect(!problem.description.contains("secret"), "a password in a message")
        }
    }

    @Test("EGRESS1: unset, the environment decides as curl does: https_proxy for https, http_proxy for http, lower case first, no_proxy's exceptions")
    func EGRESS1_environment() {
        func route(_ url: String, _ environment: [String: String], setting: Egress.Route? = nil) -> String {
            switch Egress.resolve(url: url, setting: setting, environment: environment) {
            case .success(let egress): egress.description
            case .failure(let problem): "refused: \(problem)"
            }
        }
        let both = ["HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3128", "HTTP_PROXY": "plain:8080"]
        #expect(route("https://api.example.com/", both) == "proxy lower:3128 (https_proxy)")
        #expect(route("http://127.0.0.1:8080/", both) == "proxy plain:8080 (HTTP_PROXY)", "curl's scheme-less proxy")
        #expect(route("https://api.example.com/", [:]) == "direct (no HTTPS_PROXY in the environment)")
        #expect(route("https://api.example.com/", both, setting: .direct) == "direct (egress.proxy)", "the key wins")
        #expect(route("http://x/", [:], setting: .proxy(host: "p", port: 1)) == "proxy p:1 (egress.proxy)")
        // no_proxy: names and the names below them, leading dots, *, addresses, CIDR blocks, ports.
        for (list, host, direct) in [
            ("example.com", "api.example.com", true), (".example.com", "api.example.com", true), ("*.example.com", "example.com", true),
            ("example.com", "badexample.com", false), ("*", "anything.org", true), ("10.0.0.0/8", "10.1.2.3", true),
            ("10.0.0.0/8", "11.1.2.3", false), ("127.0.0.1:8080", "127.0.0.1", true), ("[::1]", "::1", true), ("", "api.example.com", false),
            // As curl: `*` only alone; an address never matches as a name's suffix; spaces separate;
            // a trailing dot is the same name; IPv6 blocks.
            ("foo.org,*", "anything.org", false), ("2.3", "10.1.2.3", false), ("a.org b.org", "x.b.org", true),
            ("example.com", "api.example.com.", true), ("example.com.", "api.example.com", true), ("fd00::/8", "fd00::5", true),
            ("fd00::/8", "fe80::1", false), ("[::1]:443", "::1", true),
        ] {
            let said = route("https://\(host.contains(":") ? "[\(host)]" : host)/", ["HTTPS_PROXY": "http://p:3128", "no_proxy": list])
            #expect(said.hasPrefix("direct") == direct, "no_proxy \(list.debugDescription) and \(host): \(said)")
        }
        #expect(route("https://a.example.com/", ["HTTPS_PROXY": "https://p:3128"]).hasPrefix("refused: HTTPS_PROXY is"))
    }

    @Test("EGRESS3: an environment proxy the daemon cannot use, or a credentials file others may read, is 78 at load, the password in no message")
    func EGRESS3_refusedAtLoad() throws {
        let refused = problems(try load(env: ["HTTPS_PROXY": "socks5://proxy:1080"]))
        #expect(refused.count == 1 && refused[0].hasPrefix("egress.proxy: is unset, and for the token service: HTTPS_PROXY is"), "\(refused)")
        // curl's usual way to give a proxy its password, in the environment or the key: refused,
        // and the password in no line of the refusal (stderr, the journal, a refused reload's log).
        for (cli, env) in [
            ([:], ["https_proxy": "http://alice:s3cret@proxy:3128"]), ([:], ["HTTPS_PROXY": "alice:s3cret@proxy:3128"]),
            (["egress.proxy": "http://alice:s3cret@proxy:3128"], [:]), (["egress.proxy": "alice:s3cret@proxy:3128"], [:]),
            ([:], ["https_proxy": "http://alice:s3\"cret@proxy:3128"]), ([:], ["https_proxy": "http://alice:s3#cret@proxy:3128"]),
            ([:], ["https_proxy": "http://alice:s3/cret@proxy:3128"]), (["egress.proxy": "http://alice:s3?cret@proxy:3128"], [:]),
        ] {
            let said = problems(try load(cli, env: env))
            #expect(said.count == 1 && said[0].contains("***@proxy:3128"), "\(said)")
            #expect(!said.joined().contains("s3cret") && !said.joined().contains("alice"), "\(said)")
        }

        let directory = try scratchDirectory("waf-egress")
        let file = directory.appendingPathComponent("credentials").path
        try "alice:s3cret\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o644)
        let open = problems(try load(["egress.proxy": "http://proxy:3128", "egress.proxyCredentialsFile": file]))
        #expect(open.count == 1 && open[0].contains("has mode 0644, and it holds a password"), "\(open)")
        #expect(!open.joined().contains("s3cret"))
        chmod(file, 0o600)
        #expect(problems(try load(["egress.proxy": "http://proxy:3128", "egress.proxyCredentialsFile": file])).isEmpty)
        #expect(ProxyCredentials.read(file) == .success("alice:s3cret"))
        if geteuid() == 0 {
            // Another account's file, however strict its mode, is theirs to rewrite; the shipped
            // unit's user's is taken when run as root (`sudo waf-tokend --check-config`).
            // (An account that is not the unit's user on this machine, whether it has one or not.)
            let other: uid_t = ProxyCredentials.serviceUser == 999 ? 998 : 999
            chown(file, other, other)
            let theirs = problems(try load(["egress.proxy": "http://proxy:3128", "egress.proxyCredentialsFile": file]))
            #expect(theirs.count == 1 && theirs[0].contains("is owned by uid \(other), neither root nor the daemon's user"), "\(theirs)")
            #expect(ProxyCredentials.read(file, serviceUser: other) == .success("alice:s3cret"), "the unit's user's file")
            chown(file, 0, 0)
        }
        try "no colon here\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        #expect(problems(try load(["egress.proxyCredentialsFile": file])).first?.contains("does not hold user:password") == true)
    }

    @Test("EGRESS1: https to a token service or canary named by an address, through a proxy, is refused: its certificate could not be checked")
    func EGRESS1_addressOverHTTPSRefused() throws {
        let byAddress = ["applicationIntegrationUrl": "https://10.0.0.5/0123456789ab/0123456789ab/", "egress.proxy": "http://proxy:3128"]
        let refused = problems(try load(byAddress))
        #expect(refused.count == 1 && refused[0].contains("cannot carry https to the token service at the address 10.0.0.5"), "\(refused)")
        #expect(problems(try load(byAddress.merging(["egress.proxy": "direct"]) { $1 })).isEmpty, "directly, the address is checked")
    }

    @Test("EGRESS1: each provider says its egress and why; a provider's own egress.proxy wins over the top level's")
    func EGRESS1_perProvider() throws {
        let yaml = """
            egress:
              proxy: http://corp-proxy:3128
            canary:
              url: https://api.example.com/health
            providers:
              pay:
                applicationIntegrationUrl: \(service)
                domainName: pay.example.com
                egress:
                  proxy: direct
            """
        let configuration = try load(env: ["HTTPS_PROXY": "http://ignored:1"], yaml: yaml).get()
        let summary = Dictionary(uniqueKeysWithValues: configuration.egressSummary.map { ($0.provider, $0.egress) })
        #expect(summary["default"] == "proxy corp-proxy:3128 (egress.proxy)", "\(summary)")
        #expect(summary["pay"] == "direct (egress.proxy)", "\(summary)")
    }
}
