import Testing
import WAFTestTraits

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry

/// TENANT-7 as the registry decides it: a peer learns nothing of the providers it may not use,
/// not even whether they exist or which domain they answer for.
@Suite("Selection hides the providers a peer may not use", .offPool)
struct TenantSelectionTests {
    /// May use default and shop only.
    static let tenant = Registry.peer(1000)
    /// May use every provider.
    static let operatorPeer = Registry.peer(2000)

    /// default (example.com) and shop (shop.example.com) for uids 1000 and 2000; pay
    /// (pay.example.com, below default's domain) and bank (bank.example.net, below nobody's) for
    /// 2000 only.
    static func tenants() throws -> Registry {
        let registry = Registry()
        try registry.add("default", domain: "example.com", users: [1000, 2000])
        try registry.add("shop", domain: "shop.example.com", users: [1000, 2000])
        try registry.add("pay", domain: "pay.example.com", users: [2000])
        try registry.add("bank", domain: "bank.example.net", users: [2000])
        return registry
    }

    @Test("TENANT7: to a peer that may not use every provider, a name it may not use and a name nobody has get one refusal, naming neither")
    func TENANT7_forbiddenAndUnknownNamesLookAlike() throws {
        let providers = try Self.tenants().providers
        let forbidden = providers.select(["provider": "pay"], peer: Self.tenant).refusal
        let unknown = providers.select(["provider": "nope"], peer: Self.tenant).refusal
        #expect(forbidden == .noneVisible(selector: "?provider=", choices: ["default", "shop"]))
        #expect(unknown == forbidden)
    }

    @Test("TENANT7: a domain that only a provider the peer may not use covers is refused as a domain nobody covers is")
    func TENANT7_forbiddenAndUnknownDomainsLookAlike() throws {
        let providers = try Self.tenants().providers
        let refusal = SelectionRefusal.noneVisible(selector: "?domain=", choices: ["default", "shop"])
        for host in ["bank.example.net", "api.bank.example.net", "nowhere.example.net"] {
            #expect(providers.select(["domain": host], peer: Self.tenant).refusal == refusal, "\(host)")
        }
    }

    @Test("TENANT7: a domain of a provider the peer may not use neither answers for it nor shadows the parent domain it may use")
    func TENANT7_forbiddenDomainDoesNotShadowItsParent() throws {
        let providers = try Self.tenants().providers
        for host in ["pay.example.com", "api.pay.example.com"] {
            // To the tenant, pay's domain is any other name below example.com.
            #expect(providers.select(["domain": host], peer: Self.tenant).name == "default", "\(host)")
            #expect(providers.covering(domain: host, visibleTo: .some(Self.tenant))?.name == "default", "\(host)")
            #expect(providers.select(["domain": host], peer: Self.operatorPeer).name == "pay", "\(host)")
        }
    }

    @Test("TENANT7: without a selector, several providers and no default, the refusal names only the providers the peer may use")
    func TENANT7_selectorRequiredNamesOnlyUsableProviders() throws {
        let registry = Registry()
        try registry.add("shop", domain: "shop.example.com", users: [1000, 2000])
        try registry.add("pay", domain: "pay.example.com", users: [2000])
        #expect(registry.providers.select([:], peer: Self.tenant).refusal == .selectorRequired(choices: ["shop"]))
        #expect(registry.providers.select([:], peer: Self.operatorPeer).refusal == .selectorRequired(choices: ["pay", "shop"]))
    }

    @Test("TENANT7: a request without a selector whose default the peer may not use is refused without naming any provider")
    func TENANT7_implicitDefaultRefusedUnnamed() throws {
        let registry = Registry()
        try registry.add("default", domain: "example.com", users: [2000])
        try registry.add("shop", domain: "shop.example.com", users: [1000, 2000])
        #expect(registry.providers.select([:], peer: Self.tenant).refusal == .forbidden(named: nil))
        #expect(registry.providers.select(["provider": "shop"], peer: Self.tenant).name == "shop", "the one it may use is still there")
    }

    @Test("TENANT7: to a peer that may use every provider, an unknown name or domain is named back (MULTI-2)")
    func TENANT7_peerAllowedEverythingHearsTheName() throws {
        let providers = try Self.tenants().providers
        let choices = ["default", "bank", "pay", "shop"]
        #expect(providers.select(["provider": "nope"], peer: Self.operatorPeer).refusal == .unknownProvider("nope", choices: choices))
        #expect(
            providers.select(["domain": "nowhere.example.net"], peer: Self.operatorPeer).refusal
                == .unknownDomain("nowhere.example.net", choices: choices))
    }

    @Test("TENANT7: the operator's view checks no peer: any provider may be named, and a domain is matched among them all")
    func TENANT7_operatorViewIgnoresPeers() throws {
        let providers = try Self.tenants().providers
        #expect(providers.select(["provider": "pay"], peer: nil, operatorView: true).name == "pay")
        #expect(providers.select(["provider": "bank"], peer: Self.tenant, operatorView: true).name == "bank")
        #expect(providers.select(["domain": "api.pay.example.com"], peer: Self.tenant, operatorView: true).name == "pay")
        #expect(providers.select([:], peer: nil, operatorView: true).name == "default")
        // An unknown name is named there, never hidden as for a tenant.
        let unknown = providers.select(["provider": "nope"], peer: Self.tenant, operatorView: true).refusal
        guard case .unknownProvider(let name, _)? = unknown else {
            Issue.record("the operator's view names an unknown provider: \(String(describing: unknown))")
            return
        }
        #expect(name == "nope")
    }

    @Test("TENANT7: the providers a peer may use are listed in the set's order; the others, and everything to a peer without credentials, not at all")
    func TENANT7_visibleProvidersOnly() throws {
        let providers = try Self.tenants().providers
        #expect(providers.visibleProviders(to: Self.tenant).map(\.name) == ["default", "shop"])
        #expect(providers.visibleProviders(to: Self.operatorPeer).map(\.name) == ["default", "bank", "pay", "shop"])
        #expect(providers.visibleProviders(to: nil).isEmpty)
    }
}
