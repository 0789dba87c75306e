import WAFLocalTokenService

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// `--demo`: the local token service in process on loopback, the provider pointed at it, and
/// everything else in a scratch directory, so that the daemon runs on a fresh machine with no AWS
/// account and no root.
enum DemoMode {
    static let directory = "/tmp/waf-tokend-demo"

    static func start(_ sources: ConfigurationSources) async throws -> (service: LocalTokenService, sources: ConfigurationSources) {
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
            throw DaemonFailure(.osError, "cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        let service = try LocalTokenService(configuration: LocalTokenServiceConfiguration(difficulty: 8))
        let url = try await service.start()
        var sources = sources
        // The demo decides where the token comes from; the rest can still be configured.
        sources.commandLine["applicationIntegrationUrl"] = url
        sources.commandLine["domainName"] = "127.0.0.1"
        sources.fallbacks = [
            "socket.path": "\(directory)/token.sock",
            "sinks.tokenFile": "\(directory)/token",
            "sinks.cookieJar": "\(directory)/cookies.txt",
            "stateDirectory": "\(directory)/state",
        ]
        return (service, sources)
    }

    /// What to try, printed on stdout once the socket listens.
    static func banner(configuration: DaemonConfiguration, serviceURL: String) -> String {
        let socket = configuration.socketPath
        let origin = serviceURL.split(separator: "/").prefix(2).joined(separator: "//")
        let tools = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().path
        var lines = [
            "waf-tokend demo (pid \(getpid())): a local token service at \(serviceURL)",
            "socket: \(socket)",
            "",
            "try:",
            "  curl --unix-socket \(socket) http://localhost/v1/token",
            "  curl --unix-socket \(socket) 'http://localhost/v1/token?wait=10'",
            "  curl --unix-socket \(socket) http://localhost/v1/status",
            "  curl --unix-socket \(socket) -N http://localhost/v1/events",
            "  \(tools)/waf-tokenctl --socket \(socket) token",
            "  \(tools)/waf-tokenctl --socket \(socket) status",
        ]
        if let jar = configuration.cookieJar {
            lines.append("  curl -b \(jar) \(origin)/protected/hello      # the token as a cookie: 200")
            lines.append("  curl -i \(origin)/protected/hello                 # without it: 202, x-amzn-waf-action: challenge")
        }
        lines += [
            "  kill -USR2 \(getpid())   # background (again: closed);  kill -USR1 \(getpid())   # foreground",
            "  kill -HUP \(getpid())    # reload the configuration",
            "",
            "Ctrl-C stops.",
        ]
        return lines.joined(separator: "\n")
    }
}
