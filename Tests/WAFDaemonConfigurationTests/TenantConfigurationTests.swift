import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonConfiguration

/// What keeps tenants apart that only the whole configuration can get wrong.
@Suite("Tenants in the configuration", .offPool)
struct TenantConfigurationTests {
    static let url = "https://0123456789ab.us-east-1.sdk.awswaf.com/0123456789ab/0123456789ab/"
    static let payURL = "https://abcdefabcdef.eu-west-1.sdk.awswaf.com/abcdefabcdef/abcdefabcdef/"

    static func problems(_ yaml: String) throws -> [String] {
        switch ConfigurationLoader.load(ConfigurationSources(file: try configFile(yaml))) {
        case .success: []
        case .failure(let error): error.issues.map(\.description)
        }
    }

    static func twoProviders(top: String = "", pay: String = "") -> String {
        "applicationIntegrationUrl: \(url)\ndomainName: example.com\n\(top)providers:\n  pay:\n    applicationIntegrationUrl: \(payURL)\n    domainName: pay.example.com\n\(pay)"
    }

    @Test("TENANT1: one jar for providers whose readers differ is refused, naming both and the key that separates them; a jar of its own is fine")
    func TENANT1_sharedJarReadersDiffer() throws {
        let jar = "sinks:\n  cookieJar: /var/lib/w/cookies.txt\n"
        let lists = try Self.problems(Self.twoProviders(top: jar, pay: "    allowedGroups: [tenant-pay]\n    sinks:\n      group: tenant-pay\n"))
        #expect(lists.count == 1 && lists[0].contains("providers default and pay") && lists[0].contains("allowedGroups"), "\(lists)")
        let groups = try Self.problems(Self.twoProviders(top: jar, pay: "    sinks:\n      group: tenant-pay\n"))
        #expect(groups.count == 1 && groups[0].contains("sinks.group"), "\(groups)")
        let own = "    allowedGroups: [tenant-pay]\n    sinks:\n      cookieJar: /var/lib/w/pay.txt\n      group: tenant-pay\n"
        #expect(try Self.problems(Self.twoProviders(top: jar, pay: own)) == [])
        #expect(try Self.problems(Self.twoProviders(top: jar)) == [], "the same readers share a jar")
        let loaded = try ConfigurationLoader.load(ConfigurationSources(file: try configFile(Self.twoProviders(top: jar, pay: own)))).get()
        #expect(loaded.inherited(Keys.sinksCookieJar, for: loaded.providers[1]) == "/var/lib/w/pay.txt")
        #expect(loaded.inherited(Keys.sinksCookieJar, for: loaded.providers[0]) == "/var/lib/w/cookies.txt")
    }

    @Test("TENANT6: a TCP proxy listener or auth.listen without lists of who may use it is refused; with lists, or on a Unix socket, fine")
    func TENANT6_tcpListenersNeedLists() throws {
        let proxy = "proxy:\n  listen: 127.0.0.1:8089\n  upstream: https://api.example.com/\n"
        let open = try Self.problems("applicationIntegrationUrl: \(Self.url)\ndomainName: example.com\n" + proxy)
        #expect(open.count == 1 && open[0].contains("proxy.listen") && open[0].contains("no file mode guards"), "\(open)")
        #expect(try Self.problems("applicationIntegrationUrl: \(Self.url)\ndomainName: example.com\n" + proxy + "  allowedUsers: [www-data]\n") == [])
        #expect(
            try Self.problems("applicationIntegrationUrl: \(Self.url)\ndomainName: example.com\nsocket:\n  allowedGroups: [waf-token]\n" + proxy)
                == [])
        let unix = "proxy:\n  listen: /run/p.sock\n  upstream: https://api.example.com/\n"
        #expect(try Self.problems("applicationIntegrationUrl: \(Self.url)\ndomainName: example.com\n" + unix) == [])
        let auth = try Self.problems("applicationIntegrationUrl: \(Self.url)\ndomainName: example.com\nauth:\n  listen: 127.0.0.1:8090\n")
        #expect(auth.count == 1 && auth[0].contains("auth.listen"), "\(auth)")
        #expect(
            try Self.problems(
                "applicationIntegrationUrl: \(Self.url)\ndomainName: example.com\nauth:\n  listen: 127.0.0.1:8090\n  allowedUsers: [www-data]\n")
                == [])
        #expect(
            try Self.problems("applicationIntegrationUrl: \(Self.url)\ndomainName: example.com\nauth:\n  listen: 0.0.0.0:8090\n  allowedUsers: [x]\n")
                .count == 1)
    }

    @Test("TENANT10: a provider's readers are a pair: one list of its own leaves the other empty, never the socket's")
    func TENANT10_readersArePairs() throws {
        let top = "socket:\n  allowedGroups: [shop]\n"
        let config = try ConfigurationLoader.load(
            ConfigurationSources(
                file: try configFile(
                    Self.twoProviders(
                        top: top,
                        pay:
                            "    allowedUsers: [payapp]\n    proxy:\n      listen: /run/p.sock\n      upstream: https://pay.example.com/\n      allowedGroups: [shop]\n"
                    )))
        ).get()
        let (main, pay) = (config.providers[0], config.providers[1])
        #expect(config.readers(of: main) == AccessLists(users: [], groups: ["shop"]), "without lists of its own: the socket's")
        #expect(config.readers(of: pay) == AccessLists(users: ["payapp"], groups: []), "its users, and no group: not the socket's shop")
        #expect(config.proxyNarrowing(of: pay) == AccessLists(users: [], groups: ["shop"]), "its proxy's lists, which narrow the readers")
        #expect(config.proxyNarrowing(of: main) == nil)
    }

    @Test(
        "TENANT10: a token file or jar whose group is not among its provider's readers is refused, the top-level sinks.group and the daemon's group included"
    )
    func TENANT10_fileGroupAmongReaders() throws {
        let file = "    sinks:\n      tokenFile: /var/lib/w/pay.token\n"
        let topGroup = try Self.problems(Self.twoProviders(top: "sinks:\n  group: tenant-shop\n", pay: "    allowedGroups: [tenant-pay]\n" + file))
        #expect(topGroup.count == 1 && topGroup[0].hasPrefix("sinks.group: \"tenant-shop\"") && topGroup[0].contains("pay"), "\(topGroup)")
        let none = try Self.problems(Self.twoProviders(pay: "    allowedGroups: [tenant-pay]\n" + file))
        #expect(none.count == 1 && none[0].hasPrefix("providers.pay.sinks.group: is unset") && none[0].contains("daemon's group"), "\(none)")
        let usersOnly = try Self.problems(Self.twoProviders(pay: "    allowedUsers: [root]\n" + file + "      group: tenant-pay\n"))
        #expect(usersOnly.count == 1 && usersOnly[0].contains("lists users only"), "\(usersOnly)")
        #expect(try Self.problems(Self.twoProviders(pay: "    allowedGroups: [tenant-pay]\n" + file + "      group: tenant-pay\n")) == [])
        #expect(try Self.problems(Self.twoProviders(pay: file + "      group: tenant-pay\n")) == [], "readers without lists: any group")
    }
}
