import ArgumentParser
import WAFDaemonClient
import WAFJSON
import WAFVersion

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// `waf-tokenctl`: the daemon's command-line client. The token alone goes to stdout, messages to
/// stderr; exit 0 on success, 69 when there is no token or no daemon, 77 when the daemon refuses
/// this user, 64 on a usage error (docs/clients.md).
public struct WAFTokenCtl: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "waf-tokenctl",
        abstract: "Talk to waf-tokend over its Unix socket.",
        discussion: """
            The socket is --socket, else $WAF_TOKEND_SOCKET, else /run/waf-tokend/token.sock. A daemon with several \
            providers serves the one --provider or --domain names (default: its default one).
            """,
        version: WAFTokendVersion.current,
        subcommands: [Token.self, Refresh.self, Cookie.self, Status.self, Providers.self, Lifecycle.self, Watch.self, Health.self])

    @OptionGroup var global: GlobalOptions

    public init() {}
}

/// Options every subcommand takes, before or after its name.
public struct GlobalOptions: ParsableArguments {
    @Option(help: "The daemon's socket.") var socket: String?
    @Option(help: "The provider to use, by name (a daemon with several).") var provider: String?
    @Option(help: "The provider to use, by the domain it covers.") var domain: String?

    public init() {}

    public func validate() throws {
        if provider != nil && domain != nil { throw ValidationError("--provider and --domain name one provider; give one of them") }
    }

    func client() -> WAFTokenDaemonClient {
        WAFTokenDaemonClient(socketPath: socket, provider: provider.map(WAFProviderSelector.name) ?? domain.map(WAFProviderSelector.domain))
    }
}

/// The contract's exit codes (sysexits.h).
enum CtlExit {
    static let unavailable: Int32 = 69
    static let noPermission: Int32 = 77

    /// Reports `error` on stderr and exits with its code.
    static func fail(_ error: WAFTokenClientError) -> ExitCode {
        stderr("waf-tokenctl: \(error)")
        switch error {
        case .forbidden: return ExitCode(noPermission)
        case .noSuchProvider: return ExitCode.validationFailure
        default: return ExitCode(unavailable)
        }
    }

    static func stderr(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}

/// Runs `body` with a client, then shuts the client down; failures become the contract's exits.
func withClient(_ global: GlobalOptions, _ body: (WAFTokenDaemonClient) async throws(WAFTokenClientError) -> Void) async throws {
    let client = global.client()
    do {
        try await body(client)
        await client.shutdown()
    } catch {
        await client.shutdown()
        throw CtlExit.fail(error)
    }
}

extension WAFTokenCtl {
    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the token (alone on stdout), or its JSON with --json.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print the daemon's JSON (value, fetchedAt, ageSeconds, stale).") var json = false
        @Option(help: "Wait up to this many seconds for an active token (onTokenReady).") var wait: Double?

        func validate() throws {
            if let wait, !(wait > 0 && wait <= 3600) { throw ValidationError("--wait must be above 0 and at most 3600 seconds") }
        }

        func run() async throws {
            try await withClient(global) { client throws(WAFTokenClientError) in
                let token: WAFDaemonToken
                if let wait {
                    token = try await client.tokenReady(wait: .milliseconds(Int64(wait * 1000)))
                } else if let cached = try await client.getToken() {
                    token = cached
                } else {
                    throw .noToken(error: "noToken", message: "no token is cached yet; try --wait SECONDS")
                }
                print(json ? Self.json(token) : token.value)
            }
        }

        static func json(_ token: WAFDaemonToken) -> String {
            var fields = ["\"value\":\"\(token.value)\"", "\"fetchedAt\":\"\(token.fetchedAt)\""]
            if let age = token.ageSeconds { fields.append("\"ageSeconds\":\(age)") }
            if let stale = token.stale { fields.append("\"stale\":\(stale)") }
            return "{" + fields.joined(separator: ",") + "}"
        }
    }

    struct Refresh: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Get a new token now (the current one was refused) and print it.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "Wait up to this many seconds.") var wait: Double = 30

        func validate() throws {
            if !(wait > 0 && wait <= 3600) { throw ValidationError("--wait must be above 0 and at most 3600 seconds") }
        }

        func run() async throws {
            try await withClient(global) { client throws(WAFTokenClientError) in
                print(try await client.refresh(wait: .milliseconds(Int64(wait * 1000))).value)
            }
        }
    }

    struct Cookie: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the Cookie header value for a request to a path.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "The request path.") var path = "/"

        func validate() throws {
            if !path.hasPrefix("/") { throw ValidationError("--path must start with /") }
        }

        func run() async throws {
            try await withClient(global) { client throws(WAFTokenClientError) in
                guard let header = try await client.cookie(forPath: path) else {
                    throw .noToken(error: "noCookie", message: "no cookie applies to \(path)")
                }
                print(header)
            }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show lifecycle, refresh, token and proxy state.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print the daemon's JSON.") var json = false

        func run() async throws {
            try await withClient(global) { client throws(WAFTokenClientError) in
                let status = try await client.status()
                print(json ? Self.encode(status) : Self.summary(status))
            }
        }

        static func summary(_ status: JSONValue) -> String {
            func text(_ value: JSONValue?) -> String {
                switch value {
                case .string(let text)?: text
                case .number(let number)?: number.rounded() == number ? String(Int(number)) : String(number)
                case .bool(let flag)?: String(flag)
                case .null?, nil: "-"
                default: "…"
                }
            }
            let lifecycle = status["lifecycle"], refresh = status["refresh"], token = status["token"]
            var lines = [
                "lifecycle: \(text(lifecycle?["state"])) (profile \(text(lifecycle?["profile"])), active \(text(lifecycle?["active"])), paused \(text(lifecycle?["paused"])))",
                "refresh:   \(text(refresh?["state"])), next at \(text(refresh?["nextAt"])), consecutive failures \(text(refresh?["consecutiveFailures"]))",
            ]
            if let error = refresh?["lastError"], error != .null {
                lines.append("last error: \(text(error["error"])): \(text(error["message"]))")
            }
            if let token, token != .null {
                lines.append(
                    "token:     \(text(token["stale"]) == "true" ? "stale" : "fresh"), age \(text(token["ageSeconds"])) s, fingerprint \(text(token["fingerprint"])), fetched \(text(token["fetchedAt"]))"
                )
            } else {
                lines.append("token:     none yet")
            }
            if let proxy = status["proxy"], proxy != .null {
                lines.append(
                    "proxy:     \(text(proxy["listen"])) -> \(text(proxy["upstream"])) (token in \(text(proxy["tokenIn"]))), "
                        + "\(text(proxy["requests"])) requests, \(text(proxy["challenges"])) challenges, \(text(proxy["replays"])) replays, "
                        + "\(text(proxy["upstreamErrors"])) upstream errors")
            } else {
                lines.append("proxy:     off")
            }
            if let canary = status["canary"], canary != .null {
                lines.append(
                    "canary:    \(text(canary["state"])) (last answer \(text(canary["lastResult"])), last accepted \(text(canary["lastAcceptedAt"]))), "
                        + "\(text(canary["url"]))")
            }
            return lines.joined(separator: "\n")
        }

        static func encode(_ value: JSONValue) -> String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
            return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        }
    }

    struct Providers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the providers this user may use: name, domain, token, refresh.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print the daemon's JSON.") var json = false

        func run() async throws {
            try await withClient(global) { client throws(WAFTokenClientError) in
                let listed = try await client.providers()
                if json { return print(Status.encode(listed)) }
                guard case .array(let providers)? = listed["providers"] else { throw .badResponse("no list of providers") }
                for provider in providers {
                    let token = provider["token"]
                    let state = token == nil || token == .null ? "no token" : (token?["stale"] == .bool(true) ? "stale" : "fresh")
                    print(
                        [
                            provider["provider"]?.string ?? "?", provider["domainName"]?.string ?? "?", state,
                            provider["refresh"]?["state"]?.string ?? "?",
                        ]
                        .joined(separator: "\t"))
                }
            }
        }
    }

    struct Lifecycle: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Tell the daemon the app's state: foreground, background or closed.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "foreground, background or closed") var state: String

        func validate() throws {
            if !["foreground", "background", "closed"].contains(state) {
                throw ValidationError("the state must be foreground, background or closed, not \(state)")
            }
        }

        func run() async throws {
            try await withClient(global) { client throws(WAFTokenClientError) in
                let result = try await client.setLifecycle(state)
                print("lifecycle: \(result["lifecycle"]?["state"]?.string ?? state)")
            }
        }
    }

    struct Watch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print events as they come: token, lifecycle, error (one line each).")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            let client = global.client()
            do {
                for try await event in client.events() {
                    print("\(event.name) \(event.data)")
                    fflush(nil)
                }
                await client.shutdown()
            } catch {
                await client.shutdown()
                throw CtlExit.fail(WAFTokenDaemonClient.transportError(error))
            }
        }
    }

    struct Health: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Exit 0 when the daemon's core answers, 69 otherwise.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await withClient(global) { client throws(WAFTokenClientError) in
                guard try await client.isHealthy() else { throw .unreachable("the daemon's core does not answer") }
                print("ok")
            }
        }
    }
}
