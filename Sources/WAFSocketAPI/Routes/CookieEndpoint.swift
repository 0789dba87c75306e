import NIOCore
import NIOHTTP1
import WAFDaemonTransport
import WAFTokenCore

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension APIHandler {
    // MARK: /v1/cookie

    func cookie(_ context: ChannelHandlerContext, _ head: HTTPRequestHead, _ query: [String: String]) {
        let path = query["path"] ?? "/"
        func answer(_ response: HTTPReply) { respond(context, response, endpoint: "/v1/cookie") }
        guard path.hasPrefix("/") else {
            return answer(DaemonError.badCookiePath(path).reply)
        }
        guard let entry = provider(for: query, context, endpoint: "/v1/cookie") else { return }
        let manager = entry.provider.cookieManager
        let settings = manager.settings
        guard settings.setTokenCookie else {
            return answer(DaemonError.cookieOff.reply)
        }
        // The cookie of the token the peer may have now: none while a reload switches the identity.
        guard let cookie = manager.currentCookie, cookie.value == entry.token(for: connection.peer)?.token.value else {
            return answer(TokenResponseCache.noToken)
        }
        guard cookie.applies(toPath: path) else {
            return answer(DaemonError.noCookie(path: path, cookiePath: settings.path).reply)
        }
        if AcceptNegotiation.prefersJSON(Self.accept(head)) {
            answer(.json(.ok, CookieBody(cookie)))
        } else {
            answer(.text(.ok, cookie.headerValue))
        }
    }

    struct CookieBody: Encodable {
        let name = WAFCookie.name
        let value: String
        let header: String
        let domain: String
        let path: String
        let expires: String
        let secure: Bool
        let sameSite: String
        let setCookie: String

        init(_ cookie: WAFCookie) {
            value = cookie.value
            header = cookie.headerValue
            domain = cookie.domain
            path = cookie.path
            expires = HTTPReply.timeStyle.format(cookie.expires)
            secure = cookie.secure
            sameSite = cookie.sameSite
            setCookie = cookie.setCookieHeaderValue
        }
    }
}
