import Logging
import WAFEventLoopExecutor
import WAFLocalTokenService
import WAFServiceManager
import WAFStartupWarmup
import WAFSystemd
import WAFTokenDaemon
import WAFVersion

#if canImport(Glibc)
import Glibc
#endif

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

@main
enum WAFTokendMain {
    /// Synchronous, so that the executors are set before any job is enqueued (an `async` main
    /// enqueues its body first): every task runs on NIO's loops, not on libdispatch's pool, whose
    /// monitor would wake the daemon once a second for ever (docs/performance.md, "At rest").
    static func main() {
        // Before the runtime's executors and the logging system: a package manager, a script or a
        // support request asks this, and it costs the runtime's start alone.
        if CommandLine.arguments.dropFirst().elementsEqual(["--version"]) {
            print(WAFTokendVersion.current)
            exit(0)
        }
        // NIO's loops made on another thread while this one reads the command line and the
        // configuration (docs/performance.md, "Start-up in detail").
        EventLoopExecutors.makeLoopsAhead()
        WAFTokendCommand.prepare()
        // The runtime's conformance checks of the start, asked ahead on an idle CPU: started once
        // NIO's loops are made, since the making of their threads and the warm-up competed
        // (docs/decisions.md, "The start's conformance warm-up").
        EventLoopExecutors.main(alongside: { ConformanceWarmup.start(ConformanceWarmup.daemon) }) {
            // Natively to the journal when stderr is connected to it, plain lines on stderr otherwise.
            let journal = JournalLogHandler.isStandardErrorJournal
            LoggingSystem.bootstrap { label -> any LogHandler in
                if journal { return LevelControlledLogHandler(JournalLogHandler(identifier: "waf-tokend"), control: .process) }
                return LevelControlledLogHandler(StreamLogHandler.standardError(label: label), control: .process)
            }
            DaemonIntegration.install(
                DaemonIntegration(
                    makeNotifier: { SystemdNotifier() }, passedSockets: SocketActivation.inheritedSockets, startDemoService: DemoService.start,
                    unitReloader: SystemdUnitReloader()))
            await WAFTokendCommand.main()
        }
    }
}

/// Demo mode's token service: the local one, in this process, on loopback.
struct DemoService: DemoTokenService {
    let service: LocalTokenService
    let applicationIntegrationURL: String

    @Sendable static func start() async throws -> any DemoTokenService {
        let service = try LocalTokenService(configuration: LocalTokenServiceConfiguration(difficulty: 8))
        return DemoService(service: service, applicationIntegrationURL: try await service.start())
    }

    func stop() async {
        await service.stop()
    }
}
