import ArgumentParser
import Logging
import WAFDaemonConfiguration
import WAFProviderRegistry
import WAFTokenCore
import WAFTokenStorage

#if canImport(Glibc)
import Glibc
#endif

/// `waf-tokend --once`: one token for a CI job, a cron job or an init container, no daemon. The
/// provider's saved token when it is fresh, else a fetch (retried by RET-1…3); then its sinks and
/// state are written and the token (or the Cookie header value) printed alone on stdout.
enum OneShot {
    public enum Output: String, Sendable, CaseIterable, ExpressibleByArgument {
        case token, cookie
    }

    /// The exit code: 0 with the token printed, 69 without a token (the SdkError on stderr), 78
    /// for a bad configuration or an unknown provider.
    static func run(_ sources: ConfigurationSources, provider name: String?, output: Output) async -> Int32 {
        let configuration: DaemonConfiguration
        switch ConfigurationLoader.load(sources) {
        case .failure(let error):
            writeStandardError("waf-tokend: invalid configuration:\n" + error.issues.map { "  \($0.description)\n" }.joined())
            return DaemonFailure.Code.configuration.rawValue
        case .success(let loaded):
            configuration = loaded
        }
        let chosen =
            name.map { name in configuration.providers.first { $0.name == name } }
            ?? (configuration.defaultProvider ?? (configuration.providers.count == 1 ? configuration.providers.first : nil))
        guard let chosen else {
            let names = configuration.providers.map(\.name).joined(separator: ", ")
            writeStandardError(
                "waf-tokend: \(name.map { "no provider named \($0)" } ?? "several providers: choose one with --provider") (providers: \(names))\n")
            return DaemonFailure.Code.configuration.rawValue
        }
        LogLevelControl.process.level = configuration[Keys.logLevel]
        var logger = Logger(label: "waf-tokend")
        logger[metadataKey: "provider"] = "\(chosen.name)"
        do throws(DaemonFailure) {
            return try await fetch(chosen, configuration, output: output, logger: logger)
        } catch {
            writeStandardError("waf-tokend: \(error.message)\n")
            return error.code.rawValue
        }
    }

    private static func fetch(
        _ chosen: ProviderConfiguration, _ configuration: DaemonConfiguration, output: Output, logger: Logger
    ) async throws(DaemonFailure)
        -> Int32
    {
        // Through the provider's egress, as the daemon would fetch it (EGRESS-1).
        let route = try OutboundRoute.of(chosen, to: chosen.configuration.tokenServiceBaseURL, in: configuration)
        let fetcher = try TokenFetcherSettings(configuration).makeFetcher(proxy: route.proxy, logger: logger)
        let persistence = TokenPersistence(layout: layout(chosen, configuration), logger: logger)
        let state = configuration[Keys.stateDirectory].map { StateStore(directory: $0, provider: chosen.name) }
        let restored: WAFTokenProviderOptions.RestoredToken?
        do {
            restored = try state?.load(for: chosen.identity, logger: logger)
        } catch {
            throw DaemonFailure(.osError, error.message)
        }
        let provider = WAFTokenProvider(
            configuration: chosen.configuration, fetcher: fetcher, scheduler: DispatchScheduler(label: "waf-tokend.once"),
            options: WAFTokenProviderOptions(
                lifecycleProfile: configuration[Keys.lifecyclePlatform], jitter: configuration[Keys.refreshJitter],
                cookieSecure: configuration[Keys.cookieSecure], restoredToken: restored, persist: { persistence.persist($0, of: chosen.name) },
                logger: logger))
        defer { provider.shutdown() }
        let code: Int32
        do {
            let token = try await provider.tokenReady()
            persistence.flush()
            let printed = output == .cookie ? provider.cookieManager.currentCookie?.headerValue ?? "" : token.value
            print(printed)
            code = 0
        } catch {
            writeStandardError("waf-tokend: no token: \(error.name): \(error.description)\n")
            code = 69
        }
        try? await fetcher.shutdown()
        return code
    }

    /// The chosen provider's token file, state file, and its jar if the jar is its alone: a jar
    /// shared with other providers is the daemon's to write (one run must not drop their cookies).
    private static func layout(_ chosen: ProviderConfiguration, _ configuration: DaemonConfiguration) -> StorageLayout {
        let full = StorageLayout(configuration)
        return StorageLayout(
            providers: full.providers.filter { $0.key == chosen.name },
            cookieJars: full.cookieJars.filter { $0.value.providers == [chosen.name] })
    }
}
