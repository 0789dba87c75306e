import Foundation
import Testing
import WAFChallenge

/// A local token service process and a `waf-tokend` process in front of it, for `body`. Both are
/// stopped afterwards, and everything the daemon printed is checked for every token the service
/// ever issued: the value may go out only over the socket and into the sinks, never into output.
public func withDaemon(
    service serviceArguments: [String] = [], daemon arguments: [String] = [], environment: [String: String] = [:],
    configFile: String? = nil, executable: String = "waf-tokend", sourceLocation: SourceLocation = #_sourceLocation,
    _ body: (ServiceProcess, DaemonProcess) async throws -> Void
) async throws {
    let service = try ServiceProcess(serviceArguments)
    let daemon: DaemonProcess
    do {
        daemon = try await DaemonProcess.serving(
            service: service, arguments: arguments, environment: environment, configFile: configFile, executable: executable)
    } catch {
        await service.stop()
        throw error
    }
    var failure: (any Error)?
    do {
        try await body(service, daemon)
    } catch {
        failure = error
    }
    await daemon.stop()
    await expectNoLeaks(daemon, service: service, sourceLocation: sourceLocation)
    await service.stop()
    if let failure { throw failure }
}

public func expectNoLeaks(_ daemon: DaemonProcess, service: ServiceProcess, sourceLocation: SourceLocation = #_sourceLocation) async {
    let minted = (try? await service.mintedTokens()) ?? []
    #expect(daemon.leaked(minted).isEmpty, "the daemon printed a token value", sourceLocation: sourceLocation)
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
