import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFDaemonConfiguration

/// HOOK-6: delivery actions stay inside their tenant, as the files do (TENANT-1).
@Suite("Delivery actions and tenants in the configuration", .offPool)
struct DeliveryTenancyTests {
    typealias Tenants = TenantConfigurationTests

    static let run = "sinks:\n  onToken:\n    - run: [/usr/local/bin/take-token]\n"
    static let signal = "sinks:\n  onToken:\n    - signal: {pidFile: /run/app.pid, name: HUP}\n    - reload: app.service\n"

    @Test(
        "HOOK6: a top-level run inherited by providers whose readers differ is refused (78), naming the providers and the key that separates them; signal and reload may be shared"
    )
    func HOOK6_inheritedRunAcrossReaders() throws {
        let shared = try Tenants.problems(Tenants.twoProviders(top: Self.run, pay: "    allowedGroups: [tenant-pay]\n"))
        #expect(shared.count == 1, "\(shared)")
        #expect(shared.first?.contains("sinks.onToken") == true && shared.first?.contains("providers default and pay") == true)
        #expect(shared.first?.contains("allowedGroups") == true, "the key that separates them: \(shared)")
        #expect(try Tenants.problems(Tenants.twoProviders(top: Self.signal, pay: "    allowedGroups: [tenant-pay]\n")) == [], "no token in a signal")
        #expect(try Tenants.problems(Tenants.twoProviders(top: Self.run)) == [], "the same readers may share a program")
        let own = "    allowedGroups: [tenant-pay]\n    sinks:\n      onToken:\n        - run: [/usr/local/bin/pay-token]\n"
        #expect(try Tenants.problems(Tenants.twoProviders(top: Self.run, pay: own)) == [], "pay has actions of its own")
    }

    @Test("HOOK6: sinks.onTokenUsers is each provider's own: a provider without it reaches the daemon's user only")
    func HOOK6_onTokenUsersPerProvider() throws {
        let yaml = Tenants.twoProviders(top: "sinks:\n  onTokenUsers: [alice]\n", pay: "    sinks:\n      onTokenUsers: [bob]\n")
        let loaded = try ConfigurationLoader.load(ConfigurationSources(file: try configFile(yaml))).get()
        #expect(loaded.providers[0][Keys.sinksOnTokenUsers] == ["alice"])
        #expect(loaded.providers[1][Keys.sinksOnTokenUsers] == ["bob"], "pay's own, not the top level's")
        let alone = Tenants.twoProviders(top: "sinks:\n  onTokenUsers: [alice]\n")
        let inherited = try ConfigurationLoader.load(ConfigurationSources(file: try configFile(alone))).get()
        #expect(inherited.providers[1][Keys.sinksOnTokenUsers] == nil, "the default provider's list is not pay's")
    }
}
