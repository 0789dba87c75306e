import Foundation
import Testing
import WAFJSON
import WAFTestSupport
import WAFTestTraits

@Suite("Several providers: the socket API", .offPool, .timeLimit(.minutes(2)))
struct ProvidersSocketTests {
    /// The token value of a `/v1/token` answer.
    static func value(_ daemon: DaemonProcess, _ query: String = "") async throws -> String? {
        let answer = try await curl(daemon.socketPath, "/v1/token?wait=10" + query)
        return answer.code == 200 ? json(answer.body)?["value"]?.string : nil
    }

    @Test(
        "MULTI-2: ?provider= and ?domain= (the domain or its closest parent) choose a provider; none means default; both is 400; an unknown name or domain 404"
    )
    func MULTI2_choosingAProvider() async throws {
        try await withTwoProviders { first, second, daemon in
            let main = try #require(try await Self.value(daemon))
            let pay = try #require(try await Self.value(daemon, "&provider=pay"))
            #expect(main != pay)
            #expect(try await Self.value(daemon, "&provider=default") == main)
            #expect(try await Self.value(daemon, "&domain=pay.example.org") == pay)
            #expect(try await Self.value(daemon, "&domain=api.eu.PAY.example.org") == pay, "a subdomain: the closest parent's provider")
            #expect(try await Self.value(daemon, "&domain=127.0.0.1") == main)
            // The fast path answers with a selector as without one.
            #expect(json(try await curl(daemon.socketPath, "/v1/token?provider=pay").body)?["value"]?.string == pay)
            #expect(try await curl(daemon.socketPath, "/v1/token?provider=pay", ["-H", "Accept: text/plain"]).body == pay)
            #expect(try await curl(daemon.socketPath, "/v1/cookie?provider=pay").body == "aws-waf-token=\(pay)")
            for (query, code, error) in [
                ("provider=pay&domain=pay.example.org", 400, "badRequest"), ("provider=nope", 404, "unknownProvider"),
                ("domain=example.org", 404, "unknownDomain"), ("domain=127.0.0.2", 404, "unknownDomain"), ("provider=Pay", 404, "unknownProvider"),
            ] {
                for path in ["/v1/token", "/v1/cookie", "/v1/status", "/v1/events", "/readyz"] {
                    let answer = try await curl(daemon.socketPath, "\(path)?\(query)")
                    #expect(answer.code == code && json(answer.body)?["error"]?.string == error, "\(path)?\(query): \(answer)")
                }
                let refresh = try await curl(daemon.socketPath, "/v1/refresh?\(query)", ["-X", "POST"])
                #expect(refresh.code == code, "/v1/refresh?\(query): \(refresh)")
            }
            // A refresh of one provider renews that one only.
            let renewed = try await curl(daemon.socketPath, "/v1/refresh?provider=pay", ["-X", "POST"])
            #expect(renewed.code == 200 && json(renewed.body)?["value"]?.string != pay)
            #expect(try await Self.value(daemon) == main)
            let (issuedFirst, issuedSecond) = (try await first.counters().tokensIssued, try await second.counters().tokensIssued)
            #expect(issuedFirst == 1 && issuedSecond == 2)
        }
    }

    @Test("MULTI-2: with several providers and none named default, a request without a selector is 400 naming the choices")
    func MULTI2_noImplicitProvider() async throws {
        let first = try ServiceProcess(), second = try ServiceProcess(["--token-domain", "pay.example.org"])
        let file =
            "providers:\n  api:\n    applicationIntegrationUrl: \(first.url)\n    domainName: 127.0.0.1\n  pay:\n    applicationIntegrationUrl: \(second.url)\n    domainName: pay.example.org\n"
        let daemon = try await DaemonProcess.serving(service: nil, configFile: file)
        let answer = try await curl(daemon.socketPath, "/v1/token")
        #expect(answer.code == 400 && json(answer.body)?["error"]?.string == "providerRequired")
        #expect(json(answer.body)?["message"]?.string?.contains("providers: api, pay") == true, "\(answer.body)")
        #expect(try await curl(daemon.socketPath, "/v1/token?wait=10&provider=api").code == 200)
        let status = json(try await curl(daemon.socketPath, "/v1/status").body)
        #expect(status?["providers"]?["api"] != nil && status?["providers"]?["pay"] != nil && status?["provider"] == nil)
        await daemon.stop()
        await first.stop()
        await second.stop()
    }

    @Test("MULTI-3: /v1/providers, /v1/status with providers, /readyz for all or one, and events that name their provider")
    func MULTI3_listsStatusReadinessEvents() async throws {
        try await withTwoProviders { _, _, daemon in
            let pay = try #require(try await Self.value(daemon, "&provider=pay"))
            _ = try #require(try await Self.value(daemon))
            let listed = try await curl(daemon.socketPath, "/v1/providers")
            let providers = json(listed.body)?["providers"]
            guard case .array(let items)? = providers else { Issue.record("no list: \(listed.body)"); return }
            #expect(items.map { $0["provider"]?.string } == ["default", "pay"])
            #expect(items[1]["domainName"]?.string == "pay.example.org" && items[1]["token"]?["stale"] == .bool(false))
            #expect(!listed.body.contains(pay), "never a token")
            let status = json(try await curl(daemon.socketPath, "/v1/status").body)
            #expect(status?["provider"]?.string == "default" && status?["lifecycle"]?["state"]?.string == "foreground")
            #expect(status?["providers"]?["pay"]?["refresh"]?["state"]?.string == "scheduled")
            let one = json(try await curl(daemon.socketPath, "/v1/status?provider=pay").body)
            #expect(one?["provider"]?.string == "pay" && one?["providers"] == nil)
            #expect(try await curl(daemon.socketPath, "/readyz").code == 200)
            #expect(try await curl(daemon.socketPath, "/readyz?domain=pay.example.org").code == 200)
            // Events: every provider's without a selector, one provider's with.
            let all = try await run("/usr/bin/curl", ["-sN", "--max-time", "2", "--unix-socket", daemon.socketPath, "http://localhost/v1/events"])
            let only = try await run(
                "/usr/bin/curl", ["-sN", "--max-time", "2", "--unix-socket", daemon.socketPath, "http://localhost/v1/events?provider=pay"])
            #expect(all.stdout.contains(#""provider":"default""#) && all.stdout.contains(#""provider":"pay""#))
            #expect(only.stdout.contains(#""provider":"pay""#) && !only.stdout.contains(#""provider":"default""#))
            #expect(only.stdout.contains("event: token") && only.stdout.contains(pay))
        }
    }

    @Test(
        "MULTI-4: a token file and a state file per provider, one cookie jar with a cookie for each that curl -b sends to each API; restored each on its own, a damaged one set aside"
    )
    func MULTI4_filesPerProvider() async throws {
        let directory = try scratchDirectory("waf-providers")
        let (jar, state) = (directory.appendingPathComponent("jar.txt").path, directory.appendingPathComponent("state").path)
        let first = try ServiceProcess(), second = try ServiceProcess(["--token-domain", "pay.example.org"])
        let file =
            twoProvidersFile(first: first, second: second)
            + "    sinks:\n      tokenFile: \(directory.path)/pay.token\nsinks:\n  tokenFile: \(directory.path)/main.token\n  cookieJar: \(jar)\nstateDirectory: \(state)\n"
        var daemon = try await DaemonProcess.serving(service: nil, configFile: file)
        let main = try #require(try await Self.value(daemon))
        let pay = try #require(try await Self.value(daemon, "&provider=pay"))
        #expect(
            await eventually {
                (try? String(contentsOfFile: "\(directory.path)/main.token", encoding: .utf8)) == main
                    && (try? String(contentsOfFile: "\(directory.path)/pay.token", encoding: .utf8)) == pay
                    && ((try? String(contentsOfFile: jar, encoding: .utf8))?.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == 2)
                    && Set((try? FileManager.default.contentsOfDirectory(atPath: state)) ?? []) == ["token.json", "token.pay.json"]
            }, "each provider's token file, both cookies in the jar, a state file each")
        // curl -b sends each API the cookie of its own domain.
        let port = String(second.origin.split(separator: ":").last ?? "")
        let toPay = try await run(
            "/usr/bin/curl",
            [
                "-s", "-o", "/dev/null", "-w", "%{http_code}", "-b", jar, "--resolve", "pay.example.org:\(port):127.0.0.1",
                "http://pay.example.org:\(port)/protected/x",
            ])
        let toMain = try await run("/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-b", jar, first.origin + "/protected/x"])
        #expect(toPay.stdout == "200" && toMain.stdout == "200")
        // Restart with pay's state damaged: default's is served at once, pay's set aside and fetched.
        await daemon.stop()
        try "{ not json".write(toFile: "\(state)/token.pay.json", atomically: true, encoding: .utf8)
        let (firstBefore, secondBefore) = (try await first.counters().inputs, try await second.counters().inputs)
        daemon = try await DaemonProcess.serving(service: nil, configFile: file)
        #expect(json(try await curl(daemon.socketPath, "/v1/token").body)?["value"]?.string == main, "restored at once")
        #expect(try await Self.value(daemon, "&provider=pay") != nil)
        #expect(try await first.counters().inputs == firstBefore, "nothing fetched for the restored one")
        #expect(try await second.counters().inputs > secondBefore)
        #expect(try FileManager.default.contentsOfDirectory(atPath: state).contains { $0.hasPrefix("token.pay.json.bad.") })
        await daemon.stop()
        await first.stop()
        await second.stop()
    }

    @Test("MULTI-5: every provider metric carries its provider")
    func MULTI5_metricsByProvider() async throws {
        try await withTwoProviders { _, _, daemon in
            _ = try #require(try await Self.value(daemon, "&provider=pay"))
            _ = try #require(try await Self.value(daemon))
            let body = try await curl(daemon.socketPath, "/metrics").body
            for provider in ["default", "pay"] {
                #expect(body.contains(#"waf_tokend_token_fetches_total{provider="\#(provider)",egress="direct",result="success"} 1"#), "\(provider)")
                #expect(body.contains(#"waf_tokend_token_present{provider="\#(provider)"} 1"#))
                #expect(body.contains(#"waf_tokend_token_stale{provider="\#(provider)"} 0"#))
            }
        }
    }
}
