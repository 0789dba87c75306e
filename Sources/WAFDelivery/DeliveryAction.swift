/// What `sinks.onToken` does when the sinks hold a new token, for a program that read its token
/// once and must be told of the next (docs/delivery.md): signal a process named by a pid file,
/// reload a systemd unit, or run a command with the token on its standard input.
public enum DeliveryAction: Sendable, Hashable, CustomStringConvertible {
    /// The process named by `pidFile`, signalled with `signal` (its name without `SIG`: `HUP`).
    case signal(pidFile: String, signal: String)
    /// `ReloadUnit` of systemd's manager, over D-Bus.
    case reload(unit: String)
    /// The command, its first element an absolute path; the token on standard input only.
    case run([String])

    /// How logs, events and the metric's `action` label name it (never the token).
    public var description: String {
        switch self {
        case .signal(let pidFile, let signal): "signal \(signal) to \(pidFile)"
        case .reload(let unit): "reload \(unit)"
        case .run(let argv): "run \(argv.first ?? "")"
        }
    }

    /// The signals an action may send, by name: what a program that reloads on a signal listens for.
    public static let signals: [String: Int32] = [
        "HUP": 1, "INT": 2, "QUIT": 3, "USR1": 10, "USR2": 12, "ALRM": 14, "TERM": 15, "CONT": 18, "WINCH": 28,
    ]

    /// Why `self` cannot be run, nil when it can: a relative path, an unknown signal, a unit name
    /// systemd would refuse.
    public var problem: String? {
        switch self {
        case .signal(let pidFile, let signal):
            if !pidFile.hasPrefix("/") { return "signal.pidFile \(pidFile.debugDescription) is not an absolute path" }
            if Self.signals[signal] == nil {
                return "signal.name \(signal.debugDescription) is not one of \(Self.signals.keys.sorted().joined(separator: ", "))"
            }
            return nil
        case .reload(let unit):
            return Self.isUnitName(unit) ? nil : "reload \(unit.debugDescription) is not a systemd unit name (app.service, say)"
        case .run(let argv):
            guard let program = argv.first else { return "run is an empty command" }
            if !program.hasPrefix("/") { return "run's program \(program.debugDescription) is not an absolute path (no shell, no PATH lookup)" }
            if argv.contains(where: { $0.utf8.contains(0) }) { return "run holds a NUL byte" }
            return nil
        }
    }

    /// What systemd accepts as a unit name: letters, digits, `:-_.\@`, a dot and a known suffix.
    static func isUnitName(_ name: String) -> Bool {
        let suffixes = [".service", ".socket", ".target", ".timer", ".path", ".mount", ".scope", ".slice"]
        guard name.utf8.count <= 255, let suffix = suffixes.first(where: name.hasSuffix), name.count > suffix.count else { return false }
        return name.utf8.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || ":-_.\\@".utf8.contains(byte)
        }
    }
}
