import WAFDaemonTransport
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The token as `GET /v1/token` shows it (`getToken()`).
struct TokenBody: Encodable {
    let value: String
    let fetchedAt: String
    let ageSeconds: Int64
    let stale: Bool

    init(_ cached: (token: WAFToken, age: Duration, stale: Bool)) {
        value = cached.token.value
        fetchedAt = HTTPReply.timeStyle.format(cached.token.fetchedAt)
        ageSeconds = cached.age.components.seconds
        stale = cached.stale
    }
}
