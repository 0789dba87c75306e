import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFProviderRegistry

/// TENANT-2 in the registry: an entry hands a token only to a peer its lists allow now, and only
/// a token of the identity those lists belong to.
@Suite("A provider's entry and the token it hands out", .offPool)
struct ProviderEntryTests {
    static let other = try! WAFConfiguration(applicationIntegrationUrl: Registry.secondURL, domainName: "example.com")

    @Test("TENANT2: the token goes to a peer the entry's lists allow, to no other, and never to a peer without credentials")
    func TENANT2_tokenOnlyToAnAllowedPeer() throws {
        let registry = Registry()
        let entry = try registry.add("default", users: [1000])
        #expect(entry.token(for: Registry.peer(1000))?.token.value == "token-1")
        #expect(entry.token(for: Registry.peer(2000)) == nil)
        #expect(entry.token(for: nil) == nil)
        // Lists that let everyone in still need to know who asks.
        let open = try registry.add("open", domain: "open.example.com")
        #expect(open.token(for: Registry.peer(2000))?.token.value == "token-2")
        #expect(!open.allows(nil))
        #expect(open.token(for: nil) == nil)
    }

    @Test("TENANT2: once the entry answers for another identity, it hands out nothing until the provider holds that identity's token")
    func TENANT2_newIdentityWaitsForItsOwnToken() throws {
        let registry = Registry()
        let entry = try registry.add("default", users: [1000])
        let peer = Registry.peer(1000)
        entry.update(.init(identity: Self.other.identity, domainName: "example.com", access: entry.access))
        #expect(entry.token(for: peer) == nil, "token-1 was fetched for the identity the entry left")
        #expect(entry.currentToken == nil)
        #expect(entry.provider.cachedToken()?.token.value == "token-1", "the provider still holds it; the entry alone keeps it back")
        entry.provider.reconfigure(Self.other, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        registry.scheduler.runUntilIdle()
        #expect(entry.token(for: peer)?.token.value == "token-2")
        #expect(entry.currentToken?.token.value == "token-2")
    }

    @Test("TENANT2: a provider that switched identity before its entry did hands nothing out through the entry, not even to an allowed peer")
    func TENANT2_providerAheadOfItsEntry() throws {
        let registry = Registry()
        let entry = try registry.add("default", users: [1000])
        let peer = Registry.peer(1000)
        entry.provider.reconfigure(Self.other, lifecycleProfile: .ios, jitter: false, cookieSecure: false)
        registry.scheduler.runUntilIdle()
        #expect(entry.provider.cachedToken()?.token.value == "token-2", "the new identity's token is there")
        // The entry's lists still belong to the old identity: its readers must not get the new one's token.
        #expect(entry.token(for: peer) == nil)
        #expect(entry.currentToken == nil)
        entry.update(.init(identity: Self.other.identity, domainName: "example.com", access: entry.access))
        #expect(entry.token(for: peer)?.token.value == "token-2")
    }

    @Test("TENANT2: a reload's new lists decide from the moment they apply, and answers cached under the old ones are out of date at once")
    func TENANT2_newListsDecideAtOnce() throws {
        let registry = Registry()
        let generation = SnapshotGeneration()
        let entry = try registry.add("default", users: [1000], generation: generation)
        let before = generation.current
        entry.update(.init(identity: entry.tenancy.identity, domainName: "shop.example.com", access: Registry.policy([2000])))
        #expect(generation.current == before + 1)
        #expect(entry.token(for: Registry.peer(1000)) == nil)
        #expect(entry.token(for: Registry.peer(2000))?.token.value == "token-1", "same identity: its token stays good")
        #expect(entry.domainName == "shop.example.com")
        #expect(registry.providers.covering(domain: "cart.shop.example.com") === entry)
        #expect(registry.providers.covering(domain: "www.example.com") == nil, "the domain it left is no longer its")
    }
}
