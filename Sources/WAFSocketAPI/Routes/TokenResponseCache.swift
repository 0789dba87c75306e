import NIOCore
import WAFDaemonTransport
import WAFProviderRegistry
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A connection's pre-encoded answers to `GET /v1/token`, rebuilt when the second changes (age and
/// Date move) or the provider reported anything (new token, pause), so most requests cost a copy.
/// A class: the fast path keeps the one it used last and changes it in place, where copying a value
/// out of a dictionary and back cost retains and a hash per request.
final class TokenResponseCache {
    private var second = Int.min
    private var generation = UInt64.max
    /// Background refresh is on: `/v1/token` answers from the cache without any I/O (TOK-1).
    private(set) var answersFromCache = false
    private(set) var json = ByteBuffer()
    private(set) var plainText = ByteBuffer()
    private(set) var status: UInt = 0

    /// Brings the answers up to date; returns true when they were rebuilt.
    @discardableResult
    func refresh(entry: ProviderEntry, peer: PeerCredentials?, second: Int, generation: UInt64, allocator: ByteBufferAllocator) -> Bool {
        guard second != self.second || generation != self.generation else { return false }
        self.second = second
        self.generation = generation
        answersFromCache = entry.provider.configuration.backgroundRefreshEnabled
        let date = HTTPReply.date(seconds: second)
        // The token of the identity the entry answers for, none while a reload switches it; read
        // with the lists of that identity (TENANT-2).
        if let cached = entry.token(for: peer) {
            status = 200
            json = HTTPReply.json(.ok, TokenBody(cached)).encoded(keepAlive: true, date: date, allocator: allocator)
            plainText = HTTPReply.text(.ok, cached.token.value).encoded(keepAlive: true, date: date, allocator: allocator)
        } else {
            status = 503
            json = Self.noToken.encoded(keepAlive: true, date: date, allocator: allocator)
            plainText = json
        }
        return true
    }

    static let noToken = DaemonError.noToken.reply
}
