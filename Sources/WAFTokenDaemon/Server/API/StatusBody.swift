import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `GET /v1/status`: lifecycle, refresh, token (never its value) and counters. Absent values are
/// written as `null`, so that every field of the contract is always there.
struct StatusBody: Encodable {
    let status: WAFProviderStatus
    let api: APIContext

    init(_ status: WAFProviderStatus, api: APIContext) {
        self.status = status
        self.api = api
    }

    private enum Keys: String, CodingKey {
        case lifecycle, refresh, token, counters, daemon
        case state, nextAt, held, inFlight, consecutiveFailures, lastError, pendingRequests, backgroundRefreshEnabled
        case fingerprint, fetchedAt, ageSeconds, stale
        case fetchAttempts, fetchSuccesses, fetchFailures, callbackFailures, requestsServed, connections, eventSubscribers
        case version, pid, uptimeSeconds, socket, demo, proxy
        case error, message
    }

    func encode(to encoder: any Encoder) throws {
        var root = encoder.container(keyedBy: Keys.self)
        try root.encode(LifecycleBody(status.lifecycle), forKey: .lifecycle)

        var refresh = root.nestedContainer(keyedBy: Keys.self, forKey: .refresh)
        try refresh.encode(status.refresh.state.rawValue, forKey: .state)
        try refresh.encode(status.refresh.nextAt.map(APIResponse.timeStyle.format), forKey: .nextAt)
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
            try body.encode(APIResponse.timeStyle.format(token.fetchedAt), forKey: .fetchedAt)
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
        try counters.encode(api.requestsServed.load(ordering: .relaxed), forKey: .requestsServed)
        try counters.encode(api.openConnections.load(ordering: .relaxed), forKey: .connections)
        try counters.encode(api.events.subscriberCount, forKey: .eventSubscribers)

        var daemon = root.nestedContainer(keyedBy: Keys.self, forKey: .daemon)
        try daemon.encode(api.info.version, forKey: .version)
        try daemon.encode(api.info.pid, forKey: .pid)
        try daemon.encode((ContinuousClock.now - api.started).components.seconds, forKey: .uptimeSeconds)
        try daemon.encode(api.info.socketPath, forKey: .socket)
        try daemon.encode(api.info.demo, forKey: .demo)
        try root.encode(api.proxy.snapshot, forKey: .proxy)
    }
}
