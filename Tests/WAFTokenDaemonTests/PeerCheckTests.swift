import Foundation
import Testing
import WAFChallenge
import WAFTestSupport
import WAFTestTraits

/// A user and a group made for one test and removed after it: the user is in the group through the
/// group database only (its primary group is its own).
private struct ThrowawayAccount {
    let user: String
    let group: String
    let uid: UInt32
    let primaryGID: UInt32

    static func make() async throws -> ThrowawayAccount {
        let suffix = UUID().uuidString.prefix(6).lowercased()
        let group = "waftg\(suffix)", user = "waftu\(suffix)"
        try await check(run("/usr/sbin/groupadd", [group]))
        try await check(run("/usr/sbin/useradd", ["--no-create-home", "--shell", "/usr/sbin/nologin", "--groups", group, user]))
        let ids = try await run("/usr/bin/id", [user])
        let numbers = ids.stdout.split(whereSeparator: { !$0.isNumber }).compactMap { UInt32($0) }
        return ThrowawayAccount(user: user, group: group, uid: numbers[0], primaryGID: numbers[1])
    }

    func remove() async {
        _ = try? await run("/usr/sbin/userdel", [user])
        _ = try? await run("/usr/sbin/groupdel", [group])
    }

    private static func check(_ result: (status: Int32, stdout: String, stderr: String)) throws {
        guard result.status == 0 else { throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: result.stderr]) }
    }
}

@Suite("Peer check (SO_PEERCRED)", .offPool, .timeLimit(.minutes(2)))
struct PeerCheckTests {
    @Test("socket.allowedUsers: anyone else gets 403 and no token; waf-tokenctl exits 77")
    func allowedUsers() async throws {
        try await withDaemon(daemon: ["--socket-mode", "0666", "--socket-allowed-users", "root,no-such-user-here"]) { _, daemon in
            let token = try await daemon.client.tokenReady(wait: .seconds(10))
            let refused = try await curlAs(uid: nobody, gid: nobody, daemon.socketPath, "/v1/token")
            #expect(refused.code == 403)
            #expect(json(refused.body)?["error"] == .string("forbidden"))
            #expect(!refused.body.contains(token.value))
            #expect(try await curlAs(uid: nobody, gid: nobody, daemon.socketPath, "/v1/events").code == 403)
            #expect(try await curlAs(uid: 0, gid: 0, daemon.socketPath, "/v1/token").code == 200)
            let ctl = try await run(
                "/usr/bin/setpriv",
                [
                    "--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups",
                    productsDirectory.appendingPathComponent("waf-tokenctl").path, "--socket", daemon.socketPath, "token",
                ])
            #expect(ctl.status == 77)
            #expect(ctl.stdout.isEmpty)
            #expect(daemon.stderr.contains("no such user; ignored"))
            #expect(daemon.stderr.contains("connection refused by the socket's access policy"))
        }
    }

    @Test("socket.allowedGroups: a peer is in a group by its primary gid")
    func allowedByPrimaryGroup() async throws {
        try await withDaemon(daemon: ["--socket-mode", "0666", "--socket-allowed-groups", String(nobody)]) { (_, daemon) async throws in
            #expect(try await curlAs(uid: nobody, gid: nobody, daemon.socketPath, "/v1/token?wait=10").code == 200)
            #expect(try await curlAs(uid: 0, gid: 0, daemon.socketPath, "/v1/token").code == 403)
        }
    }

    @Test("socket.allowedGroups: or as a member in the group database")
    func allowedByGroupDatabase() async throws {
        let account = try await ThrowawayAccount.make()
        do {
            try await withDaemon(daemon: ["--socket-mode", "0666", "--socket-allowed-groups", account.group]) { (_, daemon) async throws in
                #expect(try await curlAs(uid: account.uid, gid: account.primaryGID, daemon.socketPath, "/v1/token?wait=10").code == 200)
                #expect(try await curlAs(uid: nobody, gid: nobody, daemon.socketPath, "/v1/token").code == 403)
            }
        } catch {
            await account.remove()
            throw error
        }
        await account.remove()
    }
}
