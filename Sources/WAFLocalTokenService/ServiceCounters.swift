/// What the local token service served, readable at `GET /__admin/counters`, so that tests can
/// assert what a provider did: how many calls of each kind, and their order.
public struct ServiceCounters: Sendable, Hashable, Codable {
    public struct Call: Sendable, Hashable, Codable {
        /// `inputs`, `verify`, `protected`.
        public var endpoint: String
        /// The status answered; nil when the connection was dropped or left stalled.
        public var status: Int?
        /// `challenge`, `redirect`, `token`, `expired`, `rejected: …`, `fault: …`, `allowed`, `challenged`.
        public var outcome: String
        /// The peer's address: where the call came from (an egress's, EGRESS-1).
        public var from: String?
    }

    public static let callLogLimit = 10_000

    public var inputs = 0
    public var redirects = 0
    public var verify = 0
    public var tokensIssued = 0
    public var verifyRejected = 0
    public var challengesExpired = 0
    public var protectedAllowed = 0
    public var protectedChallenged = 0
    /// Challenges of a token used from another address than it was acquired from.
    public var protectedReused = 0
    public var faultsApplied = 0
    /// Token-service calls being answered now, and the most ever at once: a provider makes one
    /// fetch at a time (TOK-4), so more than one means overlapping fetches.
    public var callsInFlight = 0
    public var maxCallsInFlight = 0
    /// The token-service calls in order (the oldest dropped past `callLogLimit`).
    public var calls: [Call] = []

    mutating func record(_ endpoint: Endpoint, status: Int?, outcome: String, from address: String?) {
        if calls.count >= Self.callLogLimit { calls.removeFirst(calls.count - Self.callLogLimit + 1) }
        calls.append(Call(endpoint: endpoint.rawValue, status: status, outcome: outcome, from: address))
    }
}
