import WAFDaemonConfiguration
import WAFTokenCore

#if canImport(Glibc)
import Glibc
#endif

/// `--demo`: a local token service in this process on loopback, the provider pointed at it, and
/// everything else in a scratch directory, so that the daemon runs on a fresh machine with no AWS
/// account and no root.
enum DemoMode {
    static let directory = "/tmp/waf-tokend-demo"

    /// The sources with the demo's token service and scratch paths; the rest stays configurable.
    static func sources(_ sources: ConfigurationSources, serviceURL: String) throws(DaemonFailure) -> ConfigurationSources {
        guard mkdir(directory, 0o755) == 0 || errno == EEXIST else {
            throw DaemonFailure(.osError, "cannot create \(directory): \(String(cString: strerror(errno)))")
        }
        var sources = sources
        sources.commandLine[WAFConfigurationKey.applicationIntegrationUrl.rawValue] = serviceURL
        sources.commandLine[WAFConfigurationKey.domainName.rawValue] = "127.0.0.1"
        sources.fallbacks = [
            Keys.socketPath.spec.name: "\(directory)/token.sock",
            Keys.sinksTokenFile.spec.name: "\(directory)/token",
            Keys.sinksCookieJar.spec.name: "\(directory)/cookies.txt",
            Keys.stateDirectory.spec.name: "\(directory)/state",
            // The proxy in front of the local service's protected resource.
            Keys.proxyListen.spec.name: "\(directory)/proxy.sock",
            Keys.proxyUpstream.spec.name: origin(of: serviceURL),
            // The canary asks the local service's protected resource (docs/canary.md).
            Keys.canaryURL.spec.name: origin(of: serviceURL) + "/protected/canary",
            Keys.canaryIntervalSec.spec.name: "10",
        ]
        return sources
    }

    /// What to try, printed on stdout once the socket listens.
    static func banner(configuration: DaemonConfiguration, serviceURL: String) -> String {
        let socket = configuration[Keys.socketPath]
        let origin = origin(of: serviceURL)
        let tools = executableDirectory()
        let pid = getpid()
        var lines = [
            "waf-tokend demo (pid \(pid)): a local token service at \(serviceURL)",
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
        if let jar = configuration[Keys.sinksCookieJar] {
            lines.append("  curl -b \(jar) \(origin)/protected/hello      # the token as a cookie: 200")
            lines.append("  curl -i \(origin)/protected/hello                 # without it: 202, x-amzn-waf-action: challenge")
        }
        if let proxy = configuration[Keys.proxyListen], configuration[Keys.proxyUpstream] != nil {
            let target = if case .unix(let path) = proxy { "--unix-socket \(path) http://localhost" } else { "http://\(proxy)" }
            lines.append("  curl \(target)/protected/hello   # through the proxy, no token code: 200")
        }
        if configuration.providers.contains(where: { $0[Keys.canaryURL] != nil }) {
            lines.append("  curl -X POST \(origin)/__admin/rotate   # the web ACL's key rotates: within 10 s the canary is challenged,")
            lines.append("                                          # the daemon refreshes once, the canary is accepted (see the log)")
            lines.append("  \(tools)/waf-tokenctl --socket \(socket) status   # canary: accepted, its last answer")
        }
        lines += [
            "  \(tools)/waf-tokend exec --config /dev/null --application-integration-url \(serviceURL) --domain-name 127.0.0.1 \\",
            "      -- sh -c 'while :; do echo \"token $(sha256sum < \"$WAF_TOKEN_FILE\" | cut -c1-12)\"; sleep 5; done'",
            "                      # a program that only reads a file: exec keeps the file fresh (Ctrl-C ends both)",
            "  kill -USR2 \(pid)   # background (again: closed);  kill -USR1 \(pid)   # foreground",
            "  kill -HUP \(pid)    # reload the configuration",
            "",
            "Ctrl-C stops.",
        ]
        return lines.joined(separator: "\n")
    }

    /// `http://127.0.0.1:8080` of `http://127.0.0.1:8080/path/`.
    private static func origin(of url: String) -> String {
        url.split(separator: "/").prefix(2).joined(separator: "//")
    }

    /// The directory of the running executable (where waf-tokenctl was built beside it).
    private static func executableDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return "." }
        let path = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
    }
}
