import Foundation
import Logging
import Testing
import WAFTestTraits
import WAFTokenCore

@testable import WAFTokenStorage

/// Storage on its own, on real files in a scratch directory: what a reload hands it and when.
@Suite("Token storage across a reload", .offPool)
struct StorageLedgerTests {
    static let quiet = Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() })

    static func record(_ value: String, _ identity: WAFTokenIdentity) -> WAFTokenRecord {
        WAFTokenRecord(
            identity: identity, token: WAFToken(value: value, fetchedAt: .now, fetchedAtMonotonic: .origin), cookie: nil, origin: .fetched)
    }

    static func read(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }

    @Test(
        "MULTI-4: a provider's first token that comes before storage knows the provider (a reload adds it, or gives it a new identity) is written once the new layout is in force; one it never expects is not"
    )
    func MULTI4_firstTokenBeforeTheLayout() throws {
        let directory = NSTemporaryDirectory() + "waf-ledger-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let main = WAFTokenIdentity(tokenServiceBaseURL: "https://a.example/x/", domainName: "example.com")
        let pay = WAFTokenIdentity(tokenServiceBaseURL: "https://b.example/y/", domainName: "pay.example.com")
        let other = WAFTokenIdentity(tokenServiceBaseURL: "https://c.example/z/", domainName: "pay.example.com")
        let file = { (name: String) in directory + "/" + name + ".token" }
        let before = StorageLayout(providers: ["default": .init(identity: main, tokenFile: file("default"))])
        let storage = TokenPersistence(layout: before, logger: Self.quiet)
        storage.persist(Self.record("T-main", main), of: "default")
        storage.flush()
        #expect(Self.read(file("default")) == "T-main")
        // The reload adds pay and changes default's identity; both report before the layout changes.
        storage.persist(Self.record("T-pay", pay), of: "pay")
        storage.persist(Self.record("T-main-2", other), of: "default")
        storage.flush()
        #expect(Self.read(file("pay")) == nil, "not before storage knows pay")
        #expect(Self.read(file("default")) == "T-main", "not before storage knows default's new identity")
        storage.configure(
            StorageLayout(providers: [
                "default": .init(identity: other, tokenFile: file("default")), "pay": .init(identity: pay, tokenFile: file("pay")),
            ])
        )
        storage.flush()
        #expect(Self.read(file("pay")) == "T-pay", "pay's first token, once storage expects pay")
        #expect(Self.read(file("default")) == "T-main-2", "default's first token of its new identity")
        // A record storage never expects (a reload that was refused had added this provider) is
        // forgotten at the next layout, never written.
        storage.persist(Self.record("T-gone", main), of: "gone")
        storage.configure(
            StorageLayout(providers: [
                "default": .init(identity: other, tokenFile: file("default")), "pay": .init(identity: pay, tokenFile: file("pay")),
            ])
        )
        storage.configure(
            StorageLayout(
                providers: [
                    "default": .init(identity: other, tokenFile: file("default")), "pay": .init(identity: pay, tokenFile: file("pay")),
                    "gone": .init(identity: main, tokenFile: file("gone")),
                ]))
        storage.flush()
        #expect(Self.read(file("gone")) == nil, "a record from before the layout before last is never written")
    }
}
