import Foundation
import WAFChallenge
import WAFJSON
import WAFTestTraits

/// A local token service process and a `waf-tokend` process in front of it, for `body`. Both are
/// stopped afterwards, and everything the daemon printed is checked for every token the service
/// ever issued: the value may go out only over the socket and into the sinks, never into output.
/// `naming(service)` adds daemon arguments that name the running service (its origin).
public func withDaemon(
    service serviceArguments: [String] = [], daemon arguments: [String] = [], environment: [String: String] = [:],
    configFile: String? = nil, executable: String = "waf-tokend", naming: (ServiceProcess) -> [String] = { _ in [] },
    _ body: (ServiceProcess, DaemonProcess) async throws -> Void
) async throws {
    let service = try ServiceProcess(serviceArguments)
    let daemon: DaemonProcess
    do {
        daemon = try await DaemonProcess.serving(
            service: service, arguments: arguments + naming(service), environment: environment, configFile: configFile,
            executable: executable)
    } catch {
        await service.stop()
        throw error
    }
    var failure: (any Error)?
    do {
        try await body(service, daemon)
    } catch {
        failure = error
        TestDiagnostics.printReport(reason: "the test threw \(error); its daemon's last lines:")
    }
    await daemon.stop()
    let leak = await expectNoLeaks(daemon, service: service)
    await service.stop()
    if let failure { throw failure }
    if let leak { throw leak }
    if let misuse = NIOMisuse(daemon.stderr) { throw misuse }
}

/// SwiftNIO reports some misuse on stderr and carries on (a task scheduled on a loop that has shut
/// down, as the proxy's stop once did): a test daemon that printed such a report fails its test.
public struct NIOMisuse: Error, CustomStringConvertible {
    public let line: String
    public var description: String { "the daemon printed SwiftNIO's report of a misuse: \(line)" }

    init?(_ output: String) {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("ERROR: Cannot schedule tasks") }) else { return nil }
        self.line = String(line)
    }
}

/// The daemon printed a token value: a test that sees this fails.
public struct TokenLeaked: Error, Equatable, CustomStringConvertible {
    public let count: Int
    public var description: String { "the daemon printed \(count) token value\(count == 1 ? "" : "s")" }
}

/// Nil when nothing the daemon printed holds a token the service issued.
@discardableResult
public func expectNoLeaks(_ daemon: DaemonProcess, service: ServiceProcess) async -> TokenLeaked? {
    let minted = (try? await service.mintedTokens()) ?? []
    let leaked = daemon.leaked(minted)
    return leaked.isEmpty ? nil : TokenLeaked(count: leaked.count)
}

/// The JSON body of a curl answer.
public func json(_ text: String) -> JSONValue? {
    JSONValue.parse(Array(text.utf8))
}

/// The daemon's status document.
public func status(_ daemon: DaemonProcess) async throws -> JSONValue {
    let (code, body) = try await curl(daemon.socketPath, "/v1/status")
    guard code == 200, let document = json(body) else { throw StatusUnavailable(code: code, body: body) }
    return document
}

public struct StatusUnavailable: Error {
    public let code: Int
    public let body: String
}

/// Whether the daemon's lifecycle state becomes `state` (it changes asynchronously after a signal).
public func lifecycleBecomes(_ daemon: DaemonProcess, _ state: String) async -> Bool {
    await eventually { (try? await status(daemon))?["lifecycle"]?["state"]?.string == state }
}
