import Logging
import WAFDaemonConfiguration
import WAFTokenServiceHTTP

/// What the HTTP token fetcher is built from; a reload that changes it builds a new one.
struct TokenFetcherSettings: Equatable {
    let client: String
    let timeoutSeconds: Int
    let caFile: String?

    init(_ configuration: DaemonConfiguration) {
        client = configuration[Keys.tokenServiceClient]
        timeoutSeconds = configuration[Keys.tokenServiceTimeoutSec]
        caFile = configuration[Keys.tokenServiceCAFile]
    }

    /// A client of the token service, directly or through `proxy` (EGRESS-1).
    func makeFetcher(proxy: OutboundRoute.Proxy? = nil, logger: Logger) throws(DaemonFailure) -> HTTPTokenFetcher {
        do {
            return try HTTPTokenFetcher(
                settings: .init(client: client, timeout: .seconds(timeoutSeconds), caFile: caFile, proxy: proxy?.client), logger: logger)
        } catch {
            throw DaemonFailure(.configuration, "tokenService.caFile: \(caFile ?? "") cannot be used: \(error)")
        }
    }
}
