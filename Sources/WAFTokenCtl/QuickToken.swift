import WAFDaemonClient

#if canImport(Glibc)
import Glibc
#endif

/// `waf-tokenctl token` as scripts call it, in loops (`TOKEN=$(waf-tokenctl token)`): answered
/// without ArgumentParser, event loops or tasks, which cost several times the exchange itself.
/// Only the plain forms are taken here; anything else (help, a usage error, a repeated option,
/// another command) goes to the full parser, so that every message and exit code stays its own.
public enum QuickToken {
    /// The exit status of `arguments` (without the program's name) when they are a plain `token`
    /// command; nil otherwise.
    public static func run(_ arguments: [String]) -> Int32? {
        guard let command = parse(arguments) else { return nil }
        let client = WAFTokenDaemonClient(
            socketPath: command.socket, provider: command.provider.map(WAFProviderSelector.name) ?? command.domain.map(WAFProviderSelector.domain))
        do throws(WAFTokenClientError) {
            let wait = command.wait.map { Duration.milliseconds(Int64($0 * 1000)) }
            // The plain form asks for the value alone: no JSON document to decode.
            let printed =
                try command.json
                ? client.tokenWithoutEventLoop(wait: wait).map(WAFTokenCtl.Token.json) : client.tokenValueWithoutEventLoop(wait: wait)
            guard let printed else { throw .noToken(error: "noToken", message: "no token is cached yet; try --wait SECONDS") }
            let line = printed + "\n"
            let bytes = Array(line.utf8)
            var written = 0
            while written < bytes.count {
                let count = bytes[written...].withUnsafeBytes { write(STDOUT_FILENO, $0.baseAddress, $0.count) }
                guard count > 0 else { return 74 }  // EX_IOERR: stdout is gone
                written += count
            }
            return 0
        } catch {
            return CtlExit.fail(error).rawValue
        }
    }

    struct Command: Equatable {
        var socket: String?
        var provider: String?
        var domain: String?
        var wait: Double?
        var json = false
    }

    /// The command, when `arguments` are `token` with its options and the global ones, each at
    /// most once and valid; nil for anything else.
    static func parse(_ arguments: [String]) -> Command? {
        var command = Command()
        var sawToken = false
        // An array, not a `Set`: a set of strings makes the runtime look up `String`'s `Hashable`
        // conformance, a scan of the binary's tables that cost this command a tenth of its CPU.
        var seen: [String] = []
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "token" {
                guard !sawToken else { return nil }
                sawToken = true
                continue
            }
            let (name, inline) = split(argument)
            guard !seen.contains(name) else { return nil }
            seen.append(name)
            if name == "--json" {
                guard sawToken, inline == nil else { return nil }
                command.json = true
                continue
            }
            guard ["--socket", "--provider", "--domain", "--wait"].contains(name) else { return nil }
            // --wait is the command's own: after its name, as the full parser wants it.
            if name == "--wait", !sawToken { return nil }
            guard let value = inline ?? rest.popFirst(), !value.isEmpty, !value.hasPrefix("-") else { return nil }
            switch name {
            case "--socket": command.socket = value
            case "--provider": command.provider = value
            case "--domain": command.domain = value
            default:
                guard let wait = Double(value), wait > 0, wait <= 3600 else { return nil }
                command.wait = wait
            }
        }
        guard sawToken, command.provider == nil || command.domain == nil else { return nil }
        return command
    }

    private static func split(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }
}
