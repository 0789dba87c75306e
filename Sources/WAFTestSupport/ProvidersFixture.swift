import Foundation

/// Two local token services and one daemon with a provider for each: `default` (the top-level
/// identity, domain 127.0.0.1, on `first`) and `pay` (domain pay.example.org, on `second`).
/// `configuration` is added to the file; the daemon gets `arguments`. Both services are checked
/// for leaked tokens afterwards, as `withDaemon` does for one.
public func withTwoProviders(
    configuration extra: String = "", arguments: [String] = [], environment: [String: String] = [:], executable: String = "waf-tokend",
    secondService: [String] = [], _ body: (_ first: ServiceProcess, _ second: ServiceProcess, _ daemon: DaemonProcess) async throws -> Void
) async throws {
    let first = try ServiceProcess()
    let second = try ServiceProcess(["--token-domain", "pay.example.org"] + secondService)
    let file = twoProvidersFile(first: first, second: second) + extra
    var failure: (any Error)?
    do {
        let daemon = try await DaemonProcess.serving(
            service: nil, arguments: arguments, environment: environment, configFile: file, executable: executable)
        do {
            try await body(first, second, daemon)
        } catch {
            failure = error
        }
        await daemon.stop()
        for service in [first, second] {
            if failure == nil, let leak = await expectNoLeaks(daemon, service: service) { failure = leak }
        }
        if failure == nil, let misuse = NIOMisuse(daemon.stderr) { failure = misuse }
    } catch {
        failure = error
    }
    await first.stop()
    await second.stop()
    if let failure { throw failure }
}

/// The configuration of `withTwoProviders`: the top level for `first`, `providers.pay` for `second`.
public func twoProvidersFile(first: ServiceProcess, second: ServiceProcess) -> String {
    """
    applicationIntegrationUrl: \(first.url)
    domainName: 127.0.0.1
    providers:
      pay:
        applicationIntegrationUrl: \(second.url)
        domainName: pay.example.org

    """
}
