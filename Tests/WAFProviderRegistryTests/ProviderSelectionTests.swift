import Testing
import WAFTestTraits

@testable import WAFDaemonTransport
@testable import WAFProviderRegistry

/// MULTI-2 as the registry decides it, for a peer that may use every provider: which provider
/// `?provider=`, `?domain=` or neither means, and which refusal the socket API words otherwise.
@Suite("Selecting a provider", .offPool)
struct ProviderSelectionTests {
    static let peer = Registry.peer(1000)

    /// default (example.com), shop (shop.example.com) and api (api.shop.example.com), all open:
    /// three domains nested in one another, so that "closest parent" has something to choose.
    static func nested() throws -> Registry {
        let registry = Registry()
        try registry.add("default", domain: "example.com")
        try registry.add("shop", domain: "shop.example.com")
        try registry.add("api", domain: "api.shop.example.com")
        return registry
    }

    @Test("MULTI2: ?provider= means the provider of that name, default included")
    func MULTI2_providerByName() throws {
        let providers = try Self.nested().providers
        for name in ["default", "shop", "api"] {
            #expect(providers.select(["provider": name], peer: Self.peer).name == name)
        }
    }

    @Test("MULTI2: ?domain= means the provider of that domain, else the one of its closest parent; the host's case does not matter")
    func MULTI2_domainClosestParentWins() throws {
        let providers = try Self.nested().providers
        let expected = [
            "example.com": "default", "www.example.com": "default", "shop.example.com": "shop", "cart.shop.example.com": "shop",
            "api.shop.example.com": "api", "v2.api.shop.example.com": "api", "V2.API.Shop.Example.COM": "api",
        ]
        for (host, name) in expected {
            #expect(providers.select(["domain": host], peer: Self.peer).name == name, "\(host)")
        }
    }

    @Test("MULTI2: a domain covers whole labels only: a host that merely ends with its text is not below it")
    func MULTI2_domainCoversWholeLabels() throws {
        let providers = try Self.nested().providers
        // Below example.com, but not below shop.example.com.
        #expect(providers.select(["domain": "myshop.example.com"], peer: Self.peer).name == "default")
        #expect(
            providers.select(["domain": "myexample.com"], peer: Self.peer).refusal
                == .unknownDomain("myexample.com", choices: ["default", "api", "shop"]))
    }

    @Test("MULTI2: a provider whose domain is an IP address answers for that address only, never for a name that ends with it")
    func MULTI2_ipLiteralDomainHasNoSubdomains() throws {
        let registry = Registry()
        try registry.add("local", domain: "10.0.0.1")
        try registry.add("web", domain: "example.com")
        let providers = registry.providers
        #expect(providers.select(["domain": "10.0.0.1"], peer: Self.peer).name == "local")
        for host in ["host.10.0.0.1", "1.10.0.0.1"] {
            #expect(providers.select(["domain": host], peer: Self.peer).refusal == .unknownDomain(host, choices: ["local", "web"]), "\(host)")
        }
    }

    @Test("MULTI2: without a selector a request means default, whatever else runs; other query keys change nothing")
    func MULTI2_noSelectorMeansDefault() throws {
        let providers = try Self.nested().providers
        #expect(providers.select([:], peer: Self.peer).name == "default")
        #expect(providers.select(["wait": "5"], peer: Self.peer).name == "default")
    }

    @Test("MULTI2: without a selector and without default, a request means the only provider")
    func MULTI2_noSelectorMeansTheOnlyProvider() throws {
        let registry = Registry()
        try registry.add("shop", domain: "shop.example.com")
        #expect(registry.providers.select([:], peer: Self.peer).name == "shop")
    }

    @Test("MULTI2: without a selector, with several providers and no default, the request is refused naming the choices")
    func MULTI2_severalWithoutDefaultNeedASelector() throws {
        let registry = Registry()
        try registry.add("shop", domain: "shop.example.com")
        try registry.add("pay", domain: "pay.example.com")
        #expect(registry.providers.select([:], peer: Self.peer).refusal == .selectorRequired(choices: ["pay", "shop"]))
    }

    @Test("MULTI2: ?provider= and ?domain= together are refused, even when both mean the same provider")
    func MULTI2_bothSelectorsRefused() throws {
        let providers = try Self.nested().providers
        #expect(providers.select(["provider": "shop", "domain": "shop.example.com"], peer: Self.peer).refusal == .bothSelectors)
        #expect(providers.select(["provider": "nope", "domain": "nowhere.example.net"], peer: Self.peer).refusal == .bothSelectors)
    }

    @Test("MULTI2: to a peer that may use every provider, an unknown name or a domain nobody covers is named back, with the choices")
    func MULTI2_unknownSelectorNamed() throws {
        let providers = try Self.nested().providers
        let choices = ["default", "api", "shop"]
        #expect(providers.select(["provider": "nope"], peer: Self.peer).refusal == .unknownProvider("nope", choices: choices))
        #expect(
            providers.select(["domain": "nowhere.example.net"], peer: Self.peer).refusal
                == .unknownDomain("nowhere.example.net", choices: choices))
    }

    @Test("A request whose peer has no credentials gets no provider, even an open one, and hears no name")
    func peerWithoutCredentialsGetsNothing() throws {
        let providers = try Self.nested().providers
        #expect(providers.select([:], peer: nil).refusal == .forbidden(named: nil))
        #expect(providers.select(["provider": "shop"], peer: nil).refusal == .noneVisible(selector: "?provider=", choices: []))
        #expect(providers.select(["domain": "shop.example.com"], peer: nil).refusal == .noneVisible(selector: "?domain=", choices: []))
    }
}
