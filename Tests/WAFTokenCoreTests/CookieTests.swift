import Foundation
import Testing
import WAFTestTraits
import WAFTokenCoreTestKit

@testable import WAFTokenCore

@Suite("Cookies", .offPool, .timeLimit(.minutes(1)))
struct CookieTests {
    @Test("COOK-1: the cookie goes to tokenCookiePath and below it, by RFC 6265 path-match")
    func COOK1_pathMatch() throws {
        let harness = Harness(.test(tokenCookiePath: "/web/login"))
        harness.scheduler.runUntilIdle()
        let cookies = harness.provider.cookieManager
        for path in ["/web/login", "/web/login/", "/web/login/help", "/web/login?next=/x", "/web/login/a/b#frag"] {
            #expect(cookies.cookieHeaderValue(forPath: path) == "aws-waf-token=token-1", "\(path)")
        }
        for path in ["/", "/web", "/web/order", "/web/loginx", "/WEB/login", "web/login", ""] {
            #expect(cookies.cookie(forPath: path) == nil, "\(path)")
        }
        // A cookie path ending in / covers what is below it, not the path without the slash.
        #expect(WAFCookie.pathMatches(requestPath: "/web/x", cookiePath: "/web/"))
        #expect(!WAFCookie.pathMatches(requestPath: "/web", cookiePath: "/web/"))
        #expect(WAFCookie.pathMatches(requestPath: "/anything/at/all", cookiePath: "/"))
    }

    @Test("COOK-2: with setTokenCookie false no cookie is supplied anywhere")
    func COOK2_noCookieWhenDisabled() {
        let harness = Harness(.test(setTokenCookie: false))
        harness.scheduler.runUntilIdle()
        #expect(harness.provider.getToken() != nil)
        #expect(harness.provider.cookieManager.currentCookie == nil)
        #expect(harness.provider.cookieManager.cookie(forPath: "/") == nil)
        harness.provider.storeTokenInCookieStorage(harness.provider.getToken()!)
        #expect(harness.provider.cookieManager.currentCookie == nil)
    }

    @Test("COOK-3: domain .domainName, path tokenCookiePath, SameSite=Lax, 24 h after the fetch, Secure only on request")
    func COOK3_attributes() throws {
        let harness = Harness(.test(tokenCookiePath: "/web/login"))
        harness.scheduler.runUntilIdle()
        let cookie = try #require(harness.provider.cookieManager.currentCookie)
        #expect(cookie.domain == ".example.com")
        #expect(cookie.includesSubdomains)
        #expect(cookie.path == "/web/login")
        #expect(cookie.sameSite == "Lax")
        #expect(!cookie.secure)
        #expect(cookie.expires == harness.scheduler.wallClockOrigin.addingTimeInterval(86400))
        // The virtual origin is 2023-11-14 22:13:20 UTC.
        #expect(
            cookie.setCookieHeaderValue
                == "aws-waf-token=token-1; Domain=.example.com; Path=/web/login; Expires=Wed, 15 Nov 2023 22:13:20 GMT; SameSite=Lax")

        let secure = Harness(cookieSecure: true)
        secure.scheduler.runUntilIdle()
        #expect(secure.provider.cookieManager.currentCookie?.secure == true)
        #expect(secure.provider.cookieManager.currentCookie?.setCookieHeaderValue.hasSuffix("; SameSite=Lax; Secure") == true)

        // An address can only have a host-only cookie.
        let token = WAFToken(value: "v", fetchedAt: Date(timeIntervalSince1970: 0), fetchedAtMonotonic: .origin)
        let byAddress = WAFCookie(token: token, domainName: "127.0.0.1", path: "/", secure: false)
        #expect(byAddress.domain == "127.0.0.1")
        #expect(!byAddress.includesSubdomains)
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777)) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }

    @Test("COOK-4: the cookie is written again for every token fetched or loaded")
    func COOK4_rewrittenForEveryToken() {
        let harness = Harness()
        let cookies = harness.provider.cookieManager
        harness.scheduler.runUntilIdle()
        #expect(cookies.currentCookie?.value == "token-1")
        harness.advance(to: 300)
        #expect(cookies.currentCookie?.value == "token-2")
        #expect(cookies.currentCookie?.expires == harness.scheduler.wallClockOrigin.addingTimeInterval(300 + 86400))
        harness.advance(to: 400)
        let loadedAt = harness.scheduler.wallClockOrigin.addingTimeInterval(350)
        harness.provider.loadTokenIntoProvider("from-elsewhere", fetchedAt: loadedAt)
        harness.scheduler.runUntilIdle()
        #expect(cookies.currentCookie?.value == "from-elsewhere")
        #expect(cookies.currentCookie?.expires == loadedAt.addingTimeInterval(86400))
    }
}
