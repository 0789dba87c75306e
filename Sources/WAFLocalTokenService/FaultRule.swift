/// A misbehaviour to inject into the next `count` token-service calls of `target`.
public struct FaultRule: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// Answer `status` with a small JSON error.
        case fail
        /// Close the connection without an answer.
        case drop
        /// Answer 200 with a truncated JSON document.
        case malformed
        /// Answer verify with 200 and a fresh challenge, as for an expired one.
        case expired
        /// Never answer; the connection stays open.
        case stall
        /// Answer `status` (default 200) with `body`, verbatim.
        case body
        /// Answer 200 with a JSON document of 1 MiB (whitespace, then `{}`).
        case oversized
        /// Answer 200 and a `Content-Length` of 1,000, then send the body a byte at a time every
        /// `intervalMilliseconds` (default 500): a service that is never silent for long, and never done.
        case trickle
    }

    public enum Target: String, Sendable, Hashable, Codable, CaseIterable {
        case inputs
        case verify
        /// Either token-service call.
        case any
        /// The protected resource (an upstream that fails, for the proxy's tests); never by `any`.
        case protected

        func matches(_ endpoint: Endpoint) -> Bool {
            switch (self, endpoint) {
            case (.any, .inputs), (.any, .verify), (.inputs, .inputs), (.verify, .verify), (.protected, .protected): true
            default: false
            }
        }
    }

    public var kind: Kind
    public var target: Target
    public var count: Int
    public var status: Int?
    public var body: String?
    public var intervalMilliseconds: Int?

    public init(kind: Kind, target: Target = .any, count: Int = 1, status: Int? = nil, body: String? = nil, intervalMilliseconds: Int? = nil) {
        self.kind = kind
        self.target = target
        self.count = count
        self.status = status
        self.body = body
        self.intervalMilliseconds = intervalMilliseconds
    }
}

/// The token-service endpoints the service counts and injects faults into.
enum Endpoint: String, Sendable, Codable {
    case inputs
    case verify
    case protected
}
