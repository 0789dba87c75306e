/// `waf-tokend exec`'s decisions about its child, as a value (docs/delivery.md): what a new token,
/// a signal from outside and the child's end lead to. The child's status is the supervisor's
/// (128 + N for a signal), as a shell reports it; SIGTERM, SIGINT and SIGHUP go on to the child.
public struct SupervisorMachine: Sendable {
    /// What a new token does to the child.
    public enum OnToken: String, Sendable, CaseIterable {
        /// SIGHUP (a program that does not handle it ends, as with any SIGHUP).
        case hup
        /// SIGTERM, then a new child once it ended (SIGKILL after `restartGrace`).
        case restart
        case none
    }

    enum State: Sendable, Equatable {
        /// No child yet: the first token is not in its file.
        case waiting
        case running
        /// The child was asked to end for a restart; a new one starts when it has.
        case restarting
        /// The child was asked to end (SIGTERM or SIGINT from outside); its end is the supervisor's.
        case stopping
        case done
    }

    public enum Action: Sendable, Equatable {
        case spawn
        /// To the child alone: a signal from outside, passed on.
        case signal(Int32)
        /// To the child's whole process group: ending it (EXEC-5).
        case signalGroup(Int32)
        /// SIGKILL to the child after this long, unless it ends first.
        case armKill(Duration)
        case cancelKill
        /// The supervisor exits with this status.
        case exit(Int32)
    }

    public static let restartGrace = Duration.seconds(10)
    private static let (hangUp, interrupt, terminate, kill): (Int32, Int32, Int32, Int32) = (1, 2, 15, 9)

    public let onToken: OnToken
    private(set) var state = State.waiting

    public init(onToken: OnToken) {
        self.onToken = onToken
    }

    /// The first token is in the file: the child starts, unless a SIGTERM or SIGINT came first.
    public mutating func firstTokenStored() -> [Action] {
        guard state == .waiting else { return [] }
        state = .running
        return [.spawn]
    }

    /// No first token in the file within the limit: 69 (EX_UNAVAILABLE), and no child.
    public mutating func firstTokenMissing() -> [Action] {
        guard state == .waiting else { return [] }
        state = .done
        return [.exit(69)]
    }

    public mutating func tokenArrived() -> [Action] {
        guard state == .running else { return [] }
        switch onToken {
        case .none: return []
        case .hup: return [.signal(Self.hangUp)]
        case .restart:
            state = .restarting
            return [.signalGroup(Self.terminate), .armKill(Self.restartGrace)]
        }
    }

    /// A signal the supervisor got from outside.
    public mutating func signalled(_ signal: Int32) -> [Action] {
        switch state {
        case .waiting:
            // Asked to stop before there is a child: the child never starts, and the exit is as
            // if it had ended on that signal. SIGHUP has no one to go to.
            guard signal == Self.terminate || signal == Self.interrupt else { return [] }
            state = .done
            return [.exit(128 + signal)]
        case .running, .restarting:
            if signal == Self.terminate || signal == Self.interrupt { state = .stopping }
            return [.signal(signal)]
        case .stopping:
            return [.signal(signal)]
        case .done:
            return []
        }
    }

    /// The child ended with `status` (128 + N for signal N).
    public mutating func childEnded(status: Int32) -> [Action] {
        switch state {
        case .running, .stopping:
            state = .done
            return [.cancelKill, .exit(status)]
        case .restarting:
            state = .running
            return [.cancelKill, .spawn]
        case .waiting, .done:
            preconditionFailure("a child ended while there was none: \(state)")
        }
    }

    /// The supervisor itself must end (another part of the daemon failed): the child is asked to
    /// end as on SIGTERM, and killed after the grace, since nobody outside will.
    public mutating func cancelled() -> [Action] {
        switch state {
        case .waiting:
            state = .done
            return [.exit(128 + Self.terminate)]
        case .running, .restarting:
            state = .stopping
            return [.signalGroup(Self.terminate), .armKill(Self.restartGrace)]
        case .stopping:
            return [.armKill(Self.restartGrace)]
        case .done:
            return []
        }
    }

    /// The grace is over and the child still runs: its whole group is killed.
    public mutating func killDue() -> [Action] {
        state == .restarting || state == .stopping ? [.signalGroup(Self.kill)] : []
    }
}
