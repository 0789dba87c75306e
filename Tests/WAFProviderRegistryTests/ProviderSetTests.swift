import Testing
import WAFTestTraits

@testable import WAFProviderRegistry

/// The set the listeners, signals and readiness read, as reloads add, replace and remove entries.
@Suite("The set of running providers", .offPool)
struct ProviderSetTests {
    @Test("The set lists default first, then the others by name, whatever order they were added in")
    func defaultFirstThenByName() throws {
        let registry = Registry()
        for name in ["zeta", "alpha", "default", "mid"] {
            try registry.add(name, domain: "\(name).example.com")
        }
        #expect(registry.providers.names == ["default", "alpha", "mid", "zeta"])
        #expect(registry.providers.all.map(\.name) == registry.providers.names)
    }

    @Test("An entry added under a name already there replaces the old one: one entry per name, answering for the new domain")
    func insertReplacesTheSameName() throws {
        let registry = Registry()
        try registry.add("default", domain: "example.net")
        let old = try registry.add("shop", domain: "shop.example.com")
        let new = try registry.add("shop", domain: "store.example.com")
        let providers = registry.providers
        #expect(providers.names == ["default", "shop"])
        #expect(providers.named("shop") === new)
        #expect(providers.named("shop") !== old)
        #expect(providers.covering(domain: "cart.store.example.com") === new)
        #expect(providers.covering(domain: "cart.shop.example.com") == nil, "the old domain went with the old entry")
    }

    @Test("A removed provider is gone from every lookup; removing a name that is not there finds nothing")
    func removeForgetsTheEntry() throws {
        let registry = Registry()
        let main = try registry.add("default", domain: "example.com")
        let shop = try registry.add("shop", domain: "shop.example.com")
        let providers = registry.providers
        #expect(providers.covering(domain: "cart.shop.example.com") === shop)
        let removed = providers.remove("shop")
        #expect(removed === shop)
        #expect(providers.named("shop") == nil)
        #expect(providers.names == ["default"])
        #expect(providers.covering(domain: "cart.shop.example.com") === main, "its domain falls back to the parent's provider")
        let again = providers.remove("shop")
        #expect(again == nil)
    }

    @Test("Once default is removed and one provider is left, a request without a selector means that one; with two left, none")
    func implicitFollowsTheSet() throws {
        let registry = Registry()
        let main = try registry.add("default", domain: "example.com")
        let shop = try registry.add("shop", domain: "shop.example.com")
        let providers = registry.providers
        #expect(providers.implicit === main)
        providers.remove("default")
        #expect(providers.implicit === shop)
        try registry.add("pay", domain: "pay.example.com")
        #expect(providers.implicit == nil)
    }

    @Test("Matching a domain among all providers ignores who may use them; among a peer's, only the ones it may use count")
    func coveringAmongAllOrAPeers() throws {
        let registry = Registry()
        let main = try registry.add("default", domain: "example.com", users: [1000])
        let pay = try registry.add("pay", domain: "pay.example.com", users: [2000])
        let providers = registry.providers
        #expect(providers.covering(domain: "api.pay.example.com") === pay)
        #expect(providers.covering(domain: "api.pay.example.com", visibleTo: .some(Registry.peer(1000))) === main)
        #expect(providers.covering(domain: "api.pay.example.com", visibleTo: .some(nil)) == nil, "a peer without credentials may use none")
    }
}
