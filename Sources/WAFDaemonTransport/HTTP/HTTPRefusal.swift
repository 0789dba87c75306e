import NIOHTTP1

/// Why a request is answered with an error before any route sees it, the same on every listener
/// (the socket's codec, its fast path, the proxy's own reading): one place says which status and
/// words each gets.
package enum HTTPRefusal: Error, Equatable, Sendable {
    /// 431: the head is larger than `HTTPLimits.maximumHeadBytes`, or has too many fields.
    case headTooLarge
    /// 505: a version other than HTTP/1.0 and 1.1.
    case unsupportedVersion
    /// 400, with why.
    case malformed(String)
    /// 408: the request (head or body) did not arrive within the request timeout.
    case timedOut

    package var reply: HTTPReply {
        switch self {
        case .headTooLarge:
            .error(.requestHeaderFieldsTooLarge, "requestHeaderFieldsTooLarge", "the request head exceeds \(HTTPLimits.maximumHeadBytes) bytes")
        case .unsupportedVersion: .error(.httpVersionNotSupported, "httpVersionNotSupported", "use HTTP/1.1")
        case .malformed(let why): .error(.badRequest, "badRequest", "malformed request: \(why)")
        case .timedOut: .error(.requestTimeout, "requestTimeout", "the request did not arrive in time")
        }
    }

    /// A line ending in a bare LF, in the words every listener uses.
    package static let bareLineFeed = HTTPRefusal.malformed("a line ends in a bare LF; HTTP lines end in CRLF")
}

/// Limits every listener holds requests to.
package enum HTTPLimits {
    /// A request head larger than this is refused with 431.
    package static let maximumHeadBytes = 16 * 1024
}

/// Counts answers by endpoint and status, for whichever listener gives them; the daemon's metrics
/// implement it (a transport knows no metrics registry).
package protocol RequestCounting: Sendable {
    func countRequests(endpoint: String, status: UInt, by count: Int)
}

extension RequestCounting {
    package func countRequests(endpoint: String, status: UInt) {
        countRequests(endpoint: endpoint, status: status, by: 1)
    }
}
