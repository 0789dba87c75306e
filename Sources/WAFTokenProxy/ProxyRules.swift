import NIOCore
import WAFDaemonTransport
import WAFHTTPWire
import WAFTokenCore

/// The proxy's decisions, without I/O: what goes upstream, what comes back, and what a challenge
/// leads to. `ProxyHandler` performs them.
enum ProxyRules {
    static let via = "1.1 waf-tokend"

    // MARK: Requests

    /// How a request's body travels.
    enum BodyPlan: Equatable {
        /// No body: replayable.
        case none
        /// Kept until complete (known to fit, or of unknown length and maybe fitting): replayable
        /// if it ends within the replay buffer.
        case buffer
        /// Larger than the replay buffer by its Content-Length: streamed at once, never replayed.
        case stream
    }

    static func bodyPlan(_ framing: HTTPFraming, replayBufferBytes: Int) -> BodyPlan {
        switch framing {
        case .none: .none
        case .length(let length): length <= replayBufferBytes ? .buffer : .stream
        case .chunked, .untilClose: .buffer
        }
    }

    /// How the upstream request's body is framed.
    enum Framing: Equatable {
        /// No body and no length: as the client sent it.
        case none
        case length(Int)
        case chunked
    }

    /// Writes the upstream request for the client's `head`: the configured upstream's path and
    /// `Host`, the client's end-to-end header lines as they came, the token where `tokenIn` puts
    /// it, the body's framing, `Via`.
    /// Where the upstream gets a client's request: the client's path with its dot-segments removed
    /// (`RequestPath`), below the upstream URL's base path; or the 400 that refuses it.
    static func upstreamTarget(for head: HTTPHead, upstream: UpstreamTarget) -> Result<String, DaemonError> {
        RequestPath.normalized(UpstreamTarget.originForm(head.target)).map { upstream.basePath + $0 }.mapError { .malformed($0.reason) }
    }

    static func writeUpstreamHead(
        _ head: HTTPHead, target: String, upstream: UpstreamTarget, token: String?, placement: ProxySettings.TokenPlacement,
        cookieApplies: (String) -> Bool, framing: Framing, into buffer: inout ByteBuffer
    ) {
        let tokenCookie = token != nil && placement == .cookie && cookieApplies(target)
        let tokenHeader = token != nil && placement == .header
        let hop = HopByHop(head)
        // The client's cookies and the token in one header; without cookies (the common case),
        // no pairs of a merge are built.
        var merged: String?
        if let token, tokenCookie, head.mayContain("cookie") {
            var cookies: [String] = []
            for field in head.fields where head.equals(field.name, lowercase: "cookie") && !hop.drops(field, of: head) {
                cookies.append(head.string(field.value))
            }
            if !cookies.isEmpty { merged = WAFCookie.merged(cookies, token: token) }
        }
        var length: String?
        if case .length(let count) = framing { length = String(count) }
        // Every field line is at most as long as it came, with its CRLF; the rest is counted here.
        let bound =
            head.bytes.readableBytes + target.utf8.count + upstream.authority.utf8.count + (merged?.utf8.count ?? 0)
            + (token?.utf8.count ?? 0) + WAFCookie.name.utf8.count + (length?.utf8.count ?? 0) + 160
        head.bytes.withUnsafeReadableBytes { raw in
            HeadBytes.write(into: &buffer, bound: bound) { out in
                out.append(UnsafeRawBufferPointer(rebasing: raw[head.first]))
                out.append(" ")
                out.append(target)
                out.append(" HTTP/1.1\r\n")
                // A bodiless request's one `Content-Length: 0` goes on: counted here, not read as a
                // list of values (an array per request).
                var lengths = 0
                var lengthIsZero = false
                for field in head.fields {
                    let name = field.name
                    // A name none of the checks below can match goes on at once: most of them.
                    if hop.namesNothing, HTTPHead.nameBit(of: name, raw) & upstreamDropBits == 0 {
                        out.append(UnsafeRawBufferPointer(rebasing: raw[field.line]))
                        out.append("\r\n")
                        continue
                    }
                    if head.equals(name, lowercase: "content-length") {
                        lengths += 1
                        lengthIsZero = head.equals(field.value, exactly: "0")
                        continue
                    }
                    if hop.drops(field, of: head) || head.equals(name, lowercase: "host") || head.equals(name, lowercase: "expect")
                        || (tokenCookie && head.equals(name, lowercase: "cookie"))
                        || (tokenHeader && head.equals(name, lowercase: "x-aws-waf-token"))
                    {
                        continue
                    }
                    out.append(UnsafeRawBufferPointer(rebasing: raw[field.line]))
                    out.append("\r\n")
                }
                out.append("Host: ")
                out.append(upstream.authority)
                out.append("\r\n")
                if let token, tokenCookie {
                    out.append("Cookie: ")
                    if let merged {
                        out.append(merged)
                    } else {
                        out.append(WAFCookie.name)
                        out.append("=")
                        out.append(token)
                    }
                    out.append("\r\n")
                }
                if let token, tokenHeader {
                    out.append("x-aws-waf-token: ")
                    out.append(token)
                    out.append("\r\n")
                }
                switch framing {
                case .none: if lengths == 1, lengthIsZero { out.append("Content-Length: 0\r\n") }
                case .length:
                    out.append("Content-Length: ")
                    out.append(length!)
                    out.append("\r\n")
                case .chunked: out.append("Transfer-Encoding: chunked\r\n")
                }
                out.append("Via: 1.1 waf-tokend\r\n\r\n")
            }
        }
    }

    /// RFC 9110 §9.2.2: methods whose effect is the same however often they are sent (GET, HEAD,
    /// OPTIONS, TRACE, PUT, DELETE). Only these go again after a kept-alive connection closed on
    /// them unanswered once some of the request was written (TENANT-15).
    static func isIdempotent(_ head: HTTPHead) -> Bool {
        let method = head.first
        for name: StaticString in ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"] where head.equals(method, exactly: name) { return true }
        return false
    }

    // MARK: Answers

    /// AWS WAF's answer to a request without an acceptable token.
    static func isChallenge(_ head: HTTPHead) -> Bool {
        head.status == 202 && head.lists("x-amzn-waf-action", "challenge")
    }

    /// How the answer's body reaches the client.
    enum ClientFraming: Equatable {
        /// As the upstream framed it: a length, chunks, or nothing.
        case asUpstream
        /// Chunks the client (HTTP/1.0) cannot read: their data, then the connection closes.
        case decodedUntilClose
        /// To the connection's end, as the upstream sent it.
        case untilClose
    }

    static func clientFraming(_ framing: HTTPFraming, clientMinorVersion: Int) -> ClientFraming {
        switch framing {
        case .none, .length: .asUpstream
        case .chunked: clientMinorVersion == 1 ? .asUpstream : .decodedUntilClose
        case .untilClose: .untilClose
        }
    }

    /// Writes the upstream's answer head as the client gets it: hop-by-hop headers dropped, the
    /// framing the client reads, `Via`, and `Connection: close` when the connection ends with it.
    static func writeClientHead(
        _ head: HTTPHead, framing: HTTPFraming, clientFraming: ClientFraming, keepAlive: Bool, into buffer: inout ByteBuffer
    ) {
        let hop = HopByHop(head)
        // A length that does not frame what the client gets goes: decoded chunks, a body to the
        // close, and a chunked answer that also named a length (RFC 9112 §6.3: an intermediary
        // MUST remove it; the client must not be able to read the body two ways, TENANT-9).
        let dropLength = clientFraming != .asUpstream || framing == .chunked
        head.bytes.withUnsafeReadableBytes { raw in
            HeadBytes.write(into: &buffer, bound: head.bytes.readableBytes + 96) { out in
                out.append("HTTP/1.1 ")
                out.append(UnsafeRawBufferPointer(rebasing: raw[head.second]))
                out.append(" ")
                out.append(UnsafeRawBufferPointer(rebasing: raw[head.third]))
                out.append("\r\n")
                for field in head.fields {
                    // A name neither check can match goes on at once: most of them.
                    if !hop.namesNothing || HTTPHead.nameBit(of: field.name, raw) & clientDropBits != 0 {
                        if hop.drops(field, of: head) { continue }
                        if dropLength, head.equals(field.name, lowercase: "content-length") { continue }
                    }
                    out.append(UnsafeRawBufferPointer(rebasing: raw[field.line]))
                    out.append("\r\n")
                }
                if framing == .chunked, clientFraming == .asUpstream { out.append("Transfer-Encoding: chunked\r\n") }
                out.append("Via: 1.1 waf-tokend\r\n")
                if !keepAlive || clientFraming != .asUpstream { out.append("Connection: close\r\n") }
                out.append("\r\n")
            }
        }
    }

    /// What a challenge leads to.
    enum ChallengeAnswer: Equatable {
        /// The answer goes to the client as it is.
        case passOn
        /// The request goes once more, with this token.
        case replay(token: String)
        /// A new token first (joining a refresh in flight, RET-8), then a replay.
        case refresh
    }

    static func afterChallenge(replayable: Bool, replayed: Bool, sentToken: String?, currentToken: String?) -> ChallengeAnswer {
        guard replayable, !replayed else { return .passOn }
        // A token newer than the one sent answers the challenge without a fetch.
        if let currentToken, currentToken != sentToken { return .replay(token: currentToken) }
        return .refresh
    }

    /// After the refresh a challenge asked for: a replay with a token that differs from the refused
    /// one, or the challenge passed on.
    static func afterRefresh(_ token: String?, sentToken: String?) -> ChallengeAnswer {
        guard let token, token != sentToken else { return .passOn }
        return .replay(token: token)
    }

    // MARK: Headers

    /// RFC 9110 §7.6.1: these, and every header the Connection header names, are for one hop only.
    static let hopByHop: [StaticString] = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "proxy-authenticate",
        "proxy-authorization",
    ]

    /// The name bits (`HTTPHead.nameBit`) of `hopByHop`, as constants (computed, a global would be
    /// made on first use and checked at every one); `ProxyRulesTests` holds them to the names.
    static let hopByHopBits: UInt64 = 0x6c10_0242_0020_0000
    /// What a request's head may lose on its way upstream: `hopByHop`, `Content-Length`, `Host`,
    /// `Expect`, `Cookie` and `X-Aws-Waf-Token`.
    static let upstreamDropBits: UInt64 = 0x6c10_0242_0121_0081
    /// What an answer's head may lose on its way to the client: `hopByHop`, `Content-Length`.
    static let clientDropBits: UInt64 = 0x6c10_0242_0120_0000

    /// Which of a head's fields stay behind.
    /// Not holding its head (the caller passes it): a copy of the head and of an empty set, made
    /// for each of the two heads of a request, were six retains and releases.
    struct HopByHop {
        /// What the Connection header names, lower case (rarely anything: nil then).
        private let named: Set<String>?

        /// The Connection header names no field: only the fixed names are hop-by-hop.
        var namesNothing: Bool { named == nil }

        init(_ head: HTTPHead) {
            var named: Set<String>?
            head.forEachElement("connection") { element in
                if !head.equals(element, lowercase: "close"), !head.equals(element, lowercase: "keep-alive") {
                    named = (named ?? []).union([head.string(element).lowercased()])
                }
                return true
            }
            self.named = named
        }

        func drops(_ field: HTTPHead.Field, of head: HTTPHead) -> Bool {
            let name = field.name
            // Compared in place, without making a string of the name, and only with the names
            // of its length (`hopByHop`, which the tests hold this to).
            let listed =
                switch name.count {
                case 2: head.equals(name, lowercase: "te")
                case 7: head.equals(name, lowercase: "trailer") || head.equals(name, lowercase: "upgrade")
                case 10: head.equals(name, lowercase: "connection") || head.equals(name, lowercase: "keep-alive")
                case 16: head.equals(name, lowercase: "proxy-connection")
                case 17: head.equals(name, lowercase: "transfer-encoding")
                case 18: head.equals(name, lowercase: "proxy-authenticate")
                case 19: head.equals(name, lowercase: "proxy-authorization")
                default: false
                }
            guard !listed, let named else { return listed }
            return named.contains(head.string(name).lowercased())
        }
    }
}
