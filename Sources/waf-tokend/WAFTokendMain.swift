import Logging
import WAFSystemd
import WAFTokenDaemon

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

@main
enum WAFTokendMain {
    static func main() async {
        // Natively to the journal when stderr is connected to it, plain lines on stderr otherwise.
        let journal = JournalLogHandler.isStandardErrorJournal(environment: ProcessInfo.processInfo.environment)
        LoggingSystem.bootstrap { label -> any LogHandler in
            if journal { return LevelControlledLogHandler(JournalLogHandler(identifier: "waf-tokend"), control: .process) }
            return LevelControlledLogHandler(StreamLogHandler.standardError(label: label), control: .process)
        }
        ServiceManagerIntegration.install(.systemd)
        await WAFTokendCommand.main()
    }
}
