import ArgumentParser
import Foundation
import Testing
import WAFTestTraits

@testable import WAFDaemonConfiguration
@testable import WAFTokenDaemon

/// The serving daemon's command line read without ArgumentParser (`plainKeyOptions`): the same
/// result as ArgumentParser's, or nil so that ArgumentParser reads it.
@Suite("The plain command line", .offPool)
struct PlainCommandLineTests {
    @Test("Every key name is ASCII letters, digits and dots: the names derived from it work on bytes")
    func keyNamesAreASCII() {
        for spec in Keys.all {
            #expect(
                spec.name.utf8.allSatisfy {
                    $0 == UInt8(ascii: ".") || ($0 < 128 && Character(UnicodeScalar($0)).isLetter) || ($0 >= 48 && $0 <= 57)
                }, "\(spec.name)")
        }
        #expect(Keys.tokenServiceCAFile.spec.optionName == "--token-service-ca-file")
        #expect(Keys.tokenServiceCAFile.spec.environmentName == "WAF_TOKEND_TOKEN_SERVICE_CA_FILE")
        #expect(Keys.tokenServiceCAFile.spec.propertyName == "tokenServiceCaFile")
    }

    @Test("A key's option is matched without deriving its name: every key's own option, no other key's, nothing longer or shorter")
    func optionMatching() {
        let names = Keys.all.map(\.optionName)
        #expect(Set(names).count == names.count && !names.contains("--config"), "every option names one key")
        // The shapes the table has none of yet: capitals in a row, at the end, after a dot, digits.
        let shapes = ["a.B", "aBC", "ABc", "x2Y", "a2b", "endA", "a..b", ".a", "tokenService.caFile"].map {
            KeySpec(name: $0, kind: .bool, defaultValue: nil, defaultDescription: nil, help: "", appliesOnReload: true)
        }
        for spec in Keys.all + shapes {
            let own = spec.optionName
            #expect(spec.isOption(own), "\(spec.name): \(own)")
            #expect(!spec.isOption(String(own.dropLast())) && !spec.isOption(own + "x") && !spec.isOption(own + "-"), "\(spec.name)")
            #expect(!spec.isOption(String(own.dropFirst(2))) && !spec.isOption("-" + own) && !spec.isOption(own.uppercased()), "\(spec.name)")
            for other in names + shapes.map(\.optionName) where other != own { #expect(!spec.isOption(other), "\(spec.name) matched \(other)") }
        }
        #expect(!Keys.tokenServiceCAFile.spec.isOption("--token-service-c-a-file"))
        #expect(!Keys.tokenServiceCAFile.spec.isOption("--tokenservice-ca-file"))
    }

    @Test("Key options and --config, as `--name value` or `--name=value`, read as ArgumentParser reads them")
    func sameAsArgumentParser() throws {
        let cases: [[String]] = [
            [],
            ["--config", "/etc/w.yaml"],
            ["--config=/etc/w.yaml", "--domain-name", "example.com", "--socket-path=/run/w/t.sock"],
            ["--socket-mode", "0660", "--log-level", "debug", "--token-service-ca-file", "/etc/ca.pem"],
            ["--domain-name=a=b"],
        ]
        for arguments in cases {
            let plain = try #require(WAFTokendCommand.plainKeyOptions(arguments), "\(arguments)")
            let parsed = try WAFTokendCommand.parse(arguments)
            #expect(plain.config == parsed.config, "\(arguments)")
            #expect(plain.keys == parsed.keys.values, "\(arguments)")
        }
    }

    @Test("Anything else is left to ArgumentParser: flags, help, unknown, repeated, missing or dash-led values, --")
    func leftToArgumentParser() {
        let cases: [[String]] = [
            ["--demo"], ["--check-config"], ["--once"], ["--help"], ["-h"], ["--version"],
            ["--no-such-key", "x"], ["--domain-name", "a", "--domain-name", "b"], ["--domain-name"], ["--domain-name="],
            ["--domain-name", "--socket-path"], ["--log-level=-1"], ["--", "--domain-name", "x"], ["domain-name", "x"],
            ["--provider", "pay"], ["--print", "cookie"], ["--allowed-users", "x"], ["--domain-name=\u{301}x"],
        ]
        for arguments in cases {
            #expect(WAFTokendCommand.plainKeyOptions(arguments) == nil, "\(arguments)")
        }
    }

    @Test("The environment read from environ is Foundation's, variable for variable")
    func environmentAsFoundationReadsIt() {
        let ours = WAFTokendCommand.processEnvironment()
        #expect(!ours.isEmpty)
        #expect(ours == ProcessInfo.processInfo.environment)
    }

    @Test("Of an environment's odd entries: the last of a name kept, one without = skipped, bad UTF-8 repaired")
    func environmentOddEntries() {
        let entries: [[UInt8]] = [
            Array("A=1".utf8), Array("NOEQUALS".utf8), Array("A=2".utf8), Array("=empty".utf8), Array("B=x=y".utf8), [0x43, 0x3D, 0xFF, 0x41],
        ]
        var pointers: [UnsafeMutablePointer<CChar>?] = entries.map { bytes in
            let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
            for (index, byte) in bytes.enumerated() { pointer[index] = CChar(bitPattern: byte) }
            pointer[bytes.count] = 0
            return pointer
        }
        pointers.append(nil)
        defer { for pointer in pointers { pointer?.deallocate() } }
        let environment = pointers.withUnsafeMutableBufferPointer { WAFTokendCommand.processEnvironment($0.baseAddress!) }
        #expect(environment == ["A": "2", "": "empty", "B": "x=y", "C": "\u{FFFD}A"])
    }

    @Test("A plain serving start read ahead of the executors has the sources the command's own path builds; any other is not read ahead")
    func plainStartReadAhead() throws {
        let arguments = ["--domain-name", "a.example", "--providers.pay.domainName", "pay.example", "--config=/dev/null"]
        let start = try #require(WAFTokendCommand.plainStart(arguments, environment: { ["WAF_TOKEND_LOG_LEVEL": "debug"] }))
        let (rest, options) = WAFTokendCommand.extractProviderOptions(arguments)
        let plain = try #require(WAFTokendCommand.plainKeyOptions(rest))
        #expect(start.options == ["providers.pay.domainName": "pay.example"] && start.options == options)
        #expect(start.sources.commandLine == plain.keys.merging(options) { $1 })
        #expect(start.sources.file == "/dev/null")
        #expect(start.sources.environment == ["WAF_TOKEND_LOG_LEVEL": "debug"])
        for other in [["exec", "--", "true"], ["--once"], ["--check-config"], ["--demo"], ["--help"]] {
            #expect(WAFTokendCommand.plainStart(other, environment: { [:] }) == nil, "\(other)")
        }
    }
}
