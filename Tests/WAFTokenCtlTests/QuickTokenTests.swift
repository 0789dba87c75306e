import ArgumentParser
import Testing
import WAFTestTraits

@testable import WAFTokenCtl

/// `waf-tokenctl token` is answered before ArgumentParser for its plain forms (QuickToken): each
/// command line it takes must mean what the full parser makes of it, and every other must go to
/// the full parser (help, usage errors, repeats, other commands), which keeps its messages.
@Suite("waf-tokenctl's quick token", .offPool)
struct QuickTokenTests {
    /// What the full parser makes of `arguments`, as a quick command; nil when it takes them as
    /// anything but a valid `token`.
    static func full(_ arguments: [String]) -> QuickToken.Command? {
        guard let token = (try? WAFTokenCtl.parseAsRoot(arguments)) as? WAFTokenCtl.Token else { return nil }
        return QuickToken.Command(
            socket: token.global.socket, provider: token.global.provider, domain: token.global.domain, wait: token.wait, json: token.json)
    }

    @Test("every command line the quick path takes means the same to ArgumentParser; the rest go to it")
    func sameAsTheFullParser() {
        let taken: [[String]] = [
            ["token"], ["token", "--json"], ["--socket", "/s", "token"], ["token", "--socket", "/s"], ["token", "--socket=/s"],
            ["--provider", "pay", "token", "--wait", "2.5"], ["token", "--domain", "api.example.com", "--wait=30", "--json"],
            ["--socket", "/s", "token", "--provider", "p"],
        ]
        for arguments in taken {
            let quick = QuickToken.parse(arguments)
            #expect(quick != nil, "\(arguments) is plain")
            #expect(quick == Self.full(arguments), "\(arguments): \(String(describing: quick)) against \(String(describing: Self.full(arguments)))")
        }
        let refused: [[String]] = [
            [], ["--help"], ["token", "--help"], ["help", "token"], ["status"], ["token", "token"], ["--json", "token"],
            ["--wait", "3", "token"], ["token", "--wait", "0"], ["token", "--wait", "4000"], ["token", "--wait", "soon"],
            ["token", "--provider", "a", "--domain", "b"], ["token", "--socket"], ["token", "--socket", "--json"],
            ["token", "--socket", "/a", "--socket", "/b"], ["token", "--bogus"], ["token", "extra"], ["--version"],
        ]
        for arguments in refused {
            #expect(QuickToken.parse(arguments) == nil, "\(arguments) goes to the full parser")
        }
    }
}
