import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFHTTPWire
import WAFProviderRegistry
import WAFTokenCore

extension APIHandler {
    // MARK: /v1/auth

    /// Forward authentication for the proxies operators already run (nginx `auth_request`, Caddy
    /// `forward_auth`, Traefik `ForwardAuth`, Envoy `ext_authz`): 200 with `X-Aws-Waf-Token` and
    /// the `Cookie` the proxy should forward (the request's own cookies, its `aws-waf-token`
    /// replaced by the token where COOK-1's path covers the original request), for the provider
    /// a selector names, else (with `auth.selectByForwardedHost`) the one whose domain
    /// `X-Forwarded-Host` is or is below, else the implicit one. Forwarding headers that disagree
    /// get 400 and no token (TENANT-13). Without a token yet it waits `auth.tokenWaitSec`, then
    /// 503 with Retry-After. Authorised as a token read.
    func auth(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let forwarded: ForwardedRequest
        switch ForwardedRequest.read({ head.headers[$0] }, selectByHost: api.endpointOptions.selectByForwardedHost) {
        case .success(let read): forwarded = read
        case .failure(let refusal): return respond(context, DaemonError.badForwardedHeaders(refusal.message).reply, endpoint: "/v1/auth")
        }
        var selection = query
        if query["provider"] == nil, query["domain"] == nil, let host = forwarded.host,
            api.providers.covering(domain: host, visibleTo: .some(connection.peer)) != nil
        {
            selection["domain"] = host
        }
        guard let entry = provider(for: selection, context, endpoint: "/v1/auth") else { return }
        let peer = connection.peer
        let original = forwarded.uri
        let cookies = head.headers["Cookie"]
        if let cached = entry.token(for: peer) {
            return respond(context, Self.authReply(cached.token, entry: entry, uri: original, cookies: cookies), endpoint: "/v1/auth")
        }
        let wait = api.endpointOptions.authTokenWait
        let unavailable = DaemonError.noTokenWithinAuthWait.reply
        guard wait > .zero else { return respond(context, unavailable, endpoint: "/v1/auth") }
        let reply = answerLater(context, endpoint: "/v1/auth", timeout: wait, onTimeout: unavailable)
        pendingWait = entry.provider.onTokenReady { _, _ in
            reply(entry.token(for: peer).map { Self.authReply($0.token, entry: entry, uri: original, cookies: cookies) } ?? unavailable)
        }
    }

    /// The answer a proxy copies onto the request it forwards.
    static func authReply(_ token: WAFToken, entry: ProviderEntry, uri: String, cookies: [String]) -> HTTPReply {
        var headers = [("X-Aws-Waf-Token", token.value)]
        let manager = entry.provider.cookieManager
        // COOK-1 on the path the upstream will act on; a path that hides a segment gets no cookie.
        let path = try? RequestPath.normalized(uri.hasPrefix("/") ? uri : "/").get()
        let covered = manager.settings.setTokenCookie && path.map(manager.applies(toPath:)) == true
        let cookie = WAFCookie.merged(cookies, token: covered ? token.value : nil)
        if !cookie.isEmpty { headers.append(("Cookie", cookie)) }
        return HTTPReply(status: .ok, headers: headers, body: [])
    }
}
