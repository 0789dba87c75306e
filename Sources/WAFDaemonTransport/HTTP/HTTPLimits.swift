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
