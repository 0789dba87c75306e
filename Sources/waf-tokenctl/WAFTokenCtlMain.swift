import WAFTokenCtl
import WAFVersion

#if canImport(Glibc)
import Glibc
#endif

@main
enum WAFTokenCtlMain {
    /// The plain `token` and `--version`, which scripts call in loops, are answered before
    /// ArgumentParser and NIO start (docs/performance.md, "Start-up in detail"); everything else
    /// goes to the full command.
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments == ["--version"] {
            print(WAFTokendVersion.current)
            exit(0)
        }
        if let status = QuickToken.run(arguments) { exit(status) }
        await WAFTokenCtl.main()
    }
}
