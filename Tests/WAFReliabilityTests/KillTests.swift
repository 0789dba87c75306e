import Foundation
import Testing
import WAFChallenge
import WAFJSON
import WAFTestSupport
import WAFTestTraits

@Suite("Reliability: kill -9 while files are written", .offPool, .serialized, .timeLimit(.minutes(30)))
struct KillTests {
    @Test("STATE-3 under kill -9: never a torn token file, cookie jar or state file, and no temporary left after the next start")
    func STATE3_killNineDuringWrites() async throws {
        let kills = Scale.pick(30, full: 1000)
        let service = try ServiceProcess(["--difficulty", "0"])
        let directory = try scratchDirectory("waf-kill")
        let tokenFile = directory.appendingPathComponent("token").path
        let jar = directory.appendingPathComponent("cookies.txt").path
        let state = directory.appendingPathComponent("state").path
        let arguments = ["--sinks-token-file", tokenFile, "--sinks-cookie-jar", jar, "--state-directory", state]
        var torn: [String] = []
        var leftoversAfterStart = 0
        var temporariesSeenAtKill = 0
        var leftByTheKill: Set<String> = []
        for round in 0..<kills {
            let daemon = try await DaemonProcess.serving(service: service, arguments: arguments, executable: Scale.daemon)
            // What the previous round's kill left was removed as this daemon started (what it
            // writes itself meanwhile has names of its own).
            leftoversAfterStart += leftByTheKill.intersection(try temporaries(in: [directory.path, state])).count
            // Refreshes in a row, so that the kill lands among writes.
            if let socket = try? RawSocket(path: daemon.socketPath) {
                socket.send(String(repeating: "POST /v1/refresh?wait=5 HTTP/1.1\r\nHost: x\r\n\r\n", count: 20))
                try await Task.sleep(for: .milliseconds(Int64(round % 7) * 3 + 2))
            }
            daemon.signal(SIGKILL)
            _ = await daemon.waitForExit()
            leftByTheKill = Set(try temporaries(in: [directory.path, state]))
            temporariesSeenAtKill += leftByTheKill.count
            let minted = Set(try await service.mintedTokens())
            torn += checkFiles(tokenFile: tokenFile, jar: jar, state: state, minted: minted)
            if !torn.isEmpty { break }
        }
        let last = try await DaemonProcess.serving(service: service, arguments: arguments, executable: Scale.daemon)
        leftoversAfterStart += leftByTheKill.intersection(try temporaries(in: [directory.path, state])).count
        await last.stop()
        await service.stop()
        Scale.report(
            "\(kills) kills with writes in flight: \(torn.count) torn files, \(temporariesSeenAtKill) temporaries left by the kills, \(leftoversAfterStart) still there after the next start"
        )
        #expect(torn.isEmpty, "\(torn.prefix(3))")
        #expect(leftoversAfterStart == 0)
    }

    private func temporaries(in directories: [String]) throws -> [String] {
        directories.flatMap { directory in
            ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasPrefix(".") }
        }
    }

    /// Each file that exists holds one whole token the service issued, in its format.
    private func checkFiles(tokenFile: String, jar: String, state: String, minted: Set<String>) -> [String] {
        var problems: [String] = []
        if let token = try? String(contentsOfFile: tokenFile, encoding: .utf8), !minted.contains(token) {
            problems.append("token file: \(token.prefix(40))")
        }
        if let text = try? String(contentsOfFile: jar, encoding: .utf8) {
            let fields = text.split(separator: "\n").last?.split(separator: "\t") ?? []
            if !text.hasPrefix("# Netscape HTTP Cookie File") || fields.count != 7 || !minted.contains(String(fields[6])) {
                problems.append("cookie jar: \(text.suffix(60))")
            }
        }
        if let data = FileManager.default.contents(atPath: state + "/token.json") {
            let value = JSONValue.parse(Array(data))?["value"]?.string
            if value.map({ !minted.contains($0) }) ?? true { problems.append("state file: \(String(decoding: data.prefix(60), as: UTF8.self))") }
        }
        return problems
    }
}
