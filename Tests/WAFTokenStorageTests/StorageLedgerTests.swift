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
        "MULTI-4: a first token that comes before storage knows its provider (a reload adds it) is written once the new layout is in force; an old identity's, or a stopped provider's, never"
    )
    func MULTI4_firstTokenBeforeTheLayout() throws {
        let directory = NSTemporaryDirectory() + "waf-ledger-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let main = WAFTokenIdentity(tokenServiceBaseURL: "https://a.example/x/", domainName: "example.com")
        let pay = WAFTokenIdentity(tokenServiceBaseURL: "https://b.example/y/", domainName: "pay.example.com")
        let other = WAFTokenIdentity(tokenServiceBaseURL: "https://c.example/z/", domainName: "example.com")
        let file = { (name: String) in directory + "/" + name + ".token" }
        let layout = { (entries: [(String, WAFTokenIdentity)]) in
            StorageLayout(
                providers: Dictionary(uniqueKeysWithValues: entries.map { ($0.0, StorageLayout.Target(identity: $0.1, tokenFile: file($0.0))) }))
        }
        let storage = TokenPersistence(layout: layout([("default", main)]), logger: Self.quiet)
        storage.persist(Self.record("T-main", main), of: "default")
        storage.flush()
        #expect(Self.read(file("default")) == "T-main")
        // A reload adds pay, whose provider reports before the layout changes.
        storage.persist(Self.record("T-pay", pay), of: "pay")
        storage.flush()
        #expect(Self.read(file("pay")) == nil, "not before storage knows pay")
        storage.configure(layout([("default", main), ("pay", pay)]))
        storage.flush()
        #expect(Self.read(file("pay")) == "T-pay", "pay's first token, once storage expects pay")
        // default switches to another identity and back: a record of its old identity that came
        // in between is dropped, never held for the switch back.
        storage.configure(layout([("default", other), ("pay", pay)]))
        storage.persist(Self.record("T-stale", main), of: "default")
        storage.configure(layout([("default", main), ("pay", pay)]))
        storage.flush()
        #expect(Self.read(file("default")) == nil, "an old identity's token is never written back")
        // A provider a refused reload added, which reported and stopped: forgotten, never written
        // when a later reload adds its name.
        storage.persist(Self.record("T-gone", main), of: "gone")
        storage.forget("gone")
        storage.configure(layout([("default", main), ("pay", pay), ("gone", main)]))
        storage.flush()
        #expect(Self.read(file("gone")) == nil, "a stopped provider's token is never written")
    }
}
