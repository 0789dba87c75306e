import Logging
import WAFTokenDaemon

@main
enum WAFTokendMain {
    static func main() async {
        LoggingSystem.bootstrap { label in
            LevelControlledLogHandler(StreamLogHandler.standardError(label: label), control: .process)
        }
        await WAFTokendCommand.main()
    }
}
