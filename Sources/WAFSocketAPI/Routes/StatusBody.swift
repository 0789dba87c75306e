import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `GET /v1/status`: for the provider asked for (or the implicit one), lifecycle, refresh, token
/// (never its value), counters, proxy; the daemon's facts; and, asked without a selector, every
/// provider the peer may use under `providers` (MULTI-3). Absent values are written as `null`,
/// so that every field of the contract is always there.
struct StatusBody: Encodable {
    let chosen: ProviderStatusBody?
    let providers: [ProviderStatusBody]?
    let api: APIContext

    private enum Keys: String, CodingKey {
        case daemon, providers, counters
        case requestsServed, connections, eventSubscribers
        case version, pid, uptimeSeconds, socket, demo
    }

    func encode(to encoder: any Encoder) throws {
        try chosen?.encode(to: encoder)
        var root = encoder.container(keyedBy: Keys.self)
        if chosen == nil {
            // No provider of its own at the top: the daemon's counters alone.
            var counters = root.nestedContainer(keyedBy: Keys.self, forKey: .counters)
            try counters.encode(api.requestsServed.load(ordering: .relaxed), forKey: .requestsServed)
            try counters.encode(api.openConnections.load(ordering: .relaxed), forKey: .connections)
            try counters.encode(api.events.subscriberCount, forKey: .eventSubscribers)
        }
        var daemon = root.nestedContainer(keyedBy: Keys.self, forKey: .daemon)
        try daemon.encode(api.info.version, forKey: .version)
        try daemon.encode(api.info.pid, forKey: .pid)
        try daemon.encode((ContinuousClock.now - api.started).components.seconds, forKey: .uptimeSeconds)
        try daemon.encode(api.info.socketPath, forKey: .socket)
        try daemon.encode(api.info.demo, forKey: .demo)
        if let providers {
            try root.encode(Dictionary(uniqueKeysWithValues: providers.map { ($0.name, $0) }), forKey: .providers)
        }
    }
}

/// One provider's part of the status: the same object at the top and under `providers`.
struct ProviderStatusBody: Encodable {
    let name: String
    let configuration: WAFConfiguration
    let status: WAFProviderStatus
    let board: ProxyBoard
    let canary: CanaryBoard
    /// The daemon's counters, added to the provider's where it stands at the top.
    let api: APIContext?

    init(_ entry: ProviderEntry, _ status: WAFProviderStatus, api: APIContext? = nil) {
        name = entry.name
        configuration = entry.provider.configuration
        self.status = status
        board = entry.board
        canary = entry.canary
        self.api = api
    }

    private enum Keys: String, CodingKey {
        case provider, domainName, applicationIntegrationUrl, lifecycle, refresh, token, counters, proxy, canary
        case url, lastResult, lastAcceptedAt
        case state, nextAt, held, inFlight, consecutiveFailures, lastError, pendingRequests, backgroundRefreshEnabled
        case fingerprint, fetchedAt, ageSeconds, stale
        case fetchAttempts, fetchSuccesses, fetchFailures, callbackFailures, requestsServed, connections, eventSubscribers
        case error, message
    }

    func encode(to encoder: any Encoder) throws {
        var root = encoder.container(keyedBy: Keys.self)
        try root.encode(name, forKey: .provider)
        try root.encode(configuration.domainName, forKey: .domainName)
        try root.encode(configuration.tokenServiceBaseURL, forKey: .applicationIntegrationUrl)
        try root.encode(LifecycleBody(status.lifecycle), forKey: .lifecycle)

        var refresh = root.nestedContainer(keyedBy: Keys.self, forKey: .refresh)
        try refresh.encode(status.refresh.state.rawValue, forKey: .state)
        try refresh.encode(status.refresh.nextAt.map(HTTPReply.timeStyle.format), forKey: .nextAt)
        try refresh.encode(status.refresh.held, forKey: .held)
        try refresh.encode(status.refresh.inFlight, forKey: .inFlight)
        try refresh.encode(status.refresh.consecutiveFailures, forKey: .consecutiveFailures)
        try refresh.encode(status.refresh.pendingRequests, forKey: .pendingRequests)
        try refresh.encode(status.backgroundRefreshEnabled, forKey: .backgroundRefreshEnabled)
        if let error = status.refresh.lastError {
            var last = refresh.nestedContainer(keyedBy: Keys.self, forKey: .lastError)
            try last.encode(error.name, forKey: .error)
            try last.encode(error.description, forKey: .message)
        } else {
            try refresh.encodeNil(forKey: .lastError)
        }

        if let token = status.token {
            var body = root.nestedContainer(keyedBy: Keys.self, forKey: .token)
            try body.encode(token.fingerprint, forKey: .fingerprint)
            try body.encode(HTTPReply.timeStyle.format(token.fetchedAt), forKey: .fetchedAt)
            try body.encode(token.age.components.seconds, forKey: .ageSeconds)
            try body.encode(token.stale, forKey: .stale)
        } else {
            try root.encodeNil(forKey: .token)
        }

        var counters = root.nestedContainer(keyedBy: Keys.self, forKey: .counters)
        try counters.encode(status.counters.fetchAttempts, forKey: .fetchAttempts)
        try counters.encode(status.counters.fetchSuccesses, forKey: .fetchSuccesses)
        try counters.encode(status.counters.fetchFailures, forKey: .fetchFailures)
        try counters.encode(status.counters.callbackFailures, forKey: .callbackFailures)
        if let api {
            try counters.encode(api.requestsServed.load(ordering: .relaxed), forKey: .requestsServed)
            try counters.encode(api.openConnections.load(ordering: .relaxed), forKey: .connections)
            try counters.encode(api.events.subscriberCount, forKey: .eventSubscribers)
        }
        try root.encode(board.snapshot, forKey: .proxy)
        // What the token canary found: `rejected` while the web ACL does not accept the token.
        if let canary = canary.snapshot {
            var body = root.nestedContainer(keyedBy: Keys.self, forKey: .canary)
            try body.encode(canary.state.rawValue, forKey: .state)
            try body.encode(canary.url, forKey: .url)
            try body.encode(canary.lastResult, forKey: .lastResult)
            try body.encode(canary.lastAcceptedAt.map(HTTPReply.timeStyle.format), forKey: .lastAcceptedAt)
        } else {
            try root.encodeNil(forKey: .canary)
        }
    }
}
