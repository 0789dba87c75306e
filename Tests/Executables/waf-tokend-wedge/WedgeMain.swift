import Dispatch
import Logging
import WAFServiceManager
import WAFSystemd
import WAFTokenCore
import WAFTokenDaemon

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

// waf-tokend for the watchdog tests only: the same daemon, whose provider wedges (its state
// context blocks for good) WAF_TOKEND_WEDGE_AFTER_SEC seconds after the first token is cached,
// so that a test sees the watchdog's pings stop and systemd restart the service. With several
// providers, WAF_TOKEND_WEDGE_DOMAIN picks the one to wedge (by its domainName). Not installed.

@main
enum WedgeMain {
    static func main() async {
        let delay = ProcessInfo.processInfo.environment["WAF_TOKEND_WEDGE_AFTER_SEC"].flatMap(Double.init) ?? 1
        let domain = ProcessInfo.processInfo.environment["WAF_TOKEND_WEDGE_DOMAIN"]
        LoggingSystem.bootstrap { label in
            LevelControlledLogHandler(StreamLogHandler.standardError(label: label), control: .process)
        }
        var integration = DaemonIntegration(
            makeNotifier: { SystemdNotifier() }, passedSockets: SocketActivation.inheritedSockets, unitReloader: SystemdUnitReloader())
        integration.livenessProbe = { provider in
            guard domain == nil || domain == provider.configuration.domainName else { return { completion in provider.ping(completion) } }
            Task.detached {
                while provider.cachedToken() == nil { try? await Task.sleep(for: .milliseconds(50)) }
                try? await Task.sleep(for: .milliseconds(Int64(delay * 1000)))
                Logger(label: "waf-tokend").warning("wedging the provider's state context (waf-tokend-wedge)")
                provider.ping { DispatchSemaphore(value: 0).wait() }
            }
            return { completion in provider.ping(completion) }
        }
        DaemonIntegration.install(integration)
        await WAFTokendCommand.main()
    }
}
