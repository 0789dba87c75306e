import Foundation
import Testing
import WAFDaemonConfiguration
import WAFTestSupport
import WAFTestTraits

/// A key is declared once, in `Keys`; its group's list (which `Keys.all` joins) and the sample
/// configuration are the two places a new key can be forgotten (the reference in docs/configuration.md is checked
/// by `make test` against the table). These tests read the declarations from the source, so that
/// a key declared and left out of either fails here, named.
@Suite("The key table against its declarations and the sample configuration", .offPool)
struct KeyCatalogTests {
    static let configurationSources = repositoryDirectory.appendingPathComponent("Sources/WAFDaemonConfiguration")

    /// The names of `static let name = factory("key.name", …)` in the configuration module.
    static func declaredNames() throws -> Set<String> {
        let declaration = try Regex(#"static let \w+ = \w+\(\s*"([A-Za-z.]+)""#)
        var names: Set<String> = []
        for file in try FileManager.default.contentsOfDirectory(atPath: configurationSources.path) where file.hasSuffix(".swift") {
            let text = try String(contentsOf: configurationSources.appendingPathComponent(file), encoding: .utf8)
            for match in text.matches(of: declaration) {
                if let name = match.output[1].substring { names.insert(String(name)) }
            }
        }
        return names
    }

    @Test("Every key declared in Keys is in Keys.all (which drives the loader, the options and the reference), and nothing else is")
    func declaredKeysAreInTheTable() throws {
        let declared = try Self.declaredNames()
        #expect(declared.count > 40, "the declarations were found: \(declared.count)")
        let table = Set(Keys.all.filter { if case .provider = $0.kind { false } else { true } }.map(\.name))
        #expect(declared.subtracting(table).isEmpty, "declared, missing from Keys.all: \(declared.subtracting(table).sorted())")
        #expect(table.subtracting(declared).isEmpty, "in Keys.all, not declared as the others are: \(table.subtracting(declared).sorted())")
    }

    @Test("config/waf-tokend.yaml shows every key, in its section (a provider's own keys under the commented providers: example)")
    func sampleShowsEveryKey() throws {
        let lines = try String(contentsOf: repositoryDirectory.appendingPathComponent("config/waf-tokend.yaml"), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        // A line that names `key` (given or commented out) at `indent`, inside the block that
        // the line `section:` opens (nil: the top level).
        func shows(_ key: String, in section: String?, indent: Int) -> Bool {
            var inside = section == nil
            for line in lines {
                let text = line.hasPrefix("#") ? String(line.dropFirst(line.hasPrefix("# ") ? 2 : 1)) : line
                let depth = text.prefix { $0 == " " }.count
                if let section, text.hasPrefix(section + ":") {
                    inside = true
                    continue
                }
                if section != nil, depth == 0, !text.isEmpty, !line.hasPrefix("#") { inside = false }
                if inside, depth == indent, text.dropFirst(depth).hasPrefix(key + ":") { return true }
            }
            return false
        }
        for spec in Keys.all {
            let shown: Bool
            if spec.scope == .providerOnly {
                shown = shows(spec.name, in: "providers", indent: 4)
            } else if let section = spec.section {
                shown = shows(String(spec.name.dropFirst(section.count + 1)), in: section, indent: 2)
            } else {
                shown = shows(spec.name, in: nil, indent: 0)
            }
            #expect(shown, "config/waf-tokend.yaml does not show \(spec.name)")
        }
    }
}
