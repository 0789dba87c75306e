import NIOHTTP1
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

    static func bodyPlan(_ head: HTTPRequestHead, replayBufferBytes: Int) -> BodyPlan {
        if head.headers.contains(name: "transfer-encoding") { return .buffer }
        guard let length = head.headers.first(name: "content-length").flatMap({ Int($0) }), length > 0 else { return .none }
        return length <= replayBufferBytes ? .buffer : .stream
    }

    /// How the upstream request's body is framed.
    enum Framing: Equatable {
        /// No body and no length: as the client sent it.
        case none
        case length(Int)
        case chunked
    }

    /// The upstream request for the client's `head`: the configured upstream's path and `Host`,
    /// the client's end-to-end headers, the token where `tokenIn` puts it.
    static func upstreamHead(
        _ head: HTTPRequestHead, upstream: UpstreamTarget, token: String?, placement: ProxySettings.TokenPlacement,
        cookieApplies: (String) -> Bool, framing: Framing
    ) -> HTTPRequestHead {
        let target = upstream.target(for: head.uri)
        var headers = endToEnd(head.headers, dropping: ["host", "content-length"])
        headers.add(name: "Host", value: upstream.authority)
        if let token {
            switch placement {
            case .header:
                headers.replaceOrAdd(name: "x-aws-waf-token", value: token)
            case .cookie where cookieApplies(target):
                let cookies = mergedCookies(headers[canonicalForm: "cookie"].map(String.init), token: token)
                headers.remove(name: "cookie")
                headers.add(name: "Cookie", value: cookies)
            case .cookie:
                break
            }
        }
        switch framing {
        case .none: if head.headers.first(name: "content-length") == "0" { headers.add(name: "Content-Length", value: "0") }
        case .length(let count): headers.add(name: "Content-Length", value: String(count))
        case .chunked: headers.add(name: "Transfer-Encoding", value: "chunked")
        }
        headers.add(name: "Via", value: via)
        return HTTPRequestHead(version: .http1_1, method: head.method, uri: target, headers: headers)
    }

    /// The client's cookies with `aws-waf-token` replaced by `token` (the client's others kept).
    static func mergedCookies(_ headerValues: [String], token: String) -> String {
        let pairs = headerValues.flatMap { $0.split(separator: ";") }.map { $0.trimmingWhitespace }.filter { pair in
            !pair.isEmpty && pair.prefix { $0 != "=" } != WAFCookie.name
        }
        return (pairs + ["\(WAFCookie.name)=\(token)"]).joined(separator: "; ")
    }

    // MARK: Answers

    /// AWS WAF's answer to a request without an acceptable token.
    static func isChallenge(_ head: HTTPResponseHead) -> Bool {
        head.status == .accepted && head.headers["x-amzn-waf-action"].contains { $0.trimmingWhitespace.lowercased() == "challenge" }
    }

    /// The upstream's answer as the client gets it: hop-by-hop headers dropped (the encoder frames
    /// the body anew), `Via` added.
    static func clientHead(_ head: HTTPResponseHead, keepAlive: Bool) -> HTTPResponseHead {
        var headers = endToEnd(head.headers, dropping: [])
        headers.add(name: "Via", value: via)
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        return HTTPResponseHead(version: .http1_1, status: head.status, headers: headers)
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
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "proxy-authenticate",
        "proxy-authorization",
    ]

    static func endToEnd(_ headers: HTTPHeaders, dropping extra: Set<String>) -> HTTPHeaders {
        let named = Set(headers[canonicalForm: "connection"].map { $0.lowercased() })
        var kept = HTTPHeaders()
        for (name, value) in headers {
            let lowered = name.lowercased()
            if hopByHop.contains(lowered) || named.contains(lowered) || extra.contains(lowered) { continue }
            kept.add(name: name, value: value)
        }
        return kept
    }
}

extension Substring {
    var trimmingWhitespace: String { String(self).trimmingWhitespace }
}
