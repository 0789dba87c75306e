import Logging
import NIOConcurrencyHelpers

/// The process's log level, changeable at run time (`log.level` on reload). Every logger's handler
/// reads it here rather than keeping a copy.
public final class LogLevelControl: Sendable {
    /// The control of the process's logging system, which `waf-tokend` bootstraps with it.
    public static let process = LogLevelControl()

    private let current: NIOLockedValueBox<Logger.Level>

    public init(_ level: Logger.Level = .info) {
        current = NIOLockedValueBox(level)
    }

    public var level: Logger.Level {
        get { current.withLockedValue { $0 } }
        set { current.withLockedValue { $0 = newValue } }
    }
}

/// A log handler whose level is the shared `LogLevelControl`'s; writing is the upstream's job.
public struct LevelControlledLogHandler<Upstream: LogHandler>: LogHandler {
    private var upstream: Upstream
    private let control: LogLevelControl

    public init(_ upstream: Upstream, control: LogLevelControl) {
        var upstream = upstream
        upstream.logLevel = .trace
        self.upstream = upstream
        self.control = control
    }

    public var logLevel: Logger.Level {
        get { control.level }
        set { control.level = newValue }
    }

    public var metadata: Logger.Metadata {
        get { upstream.metadata }
        set { upstream.metadata = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { upstream[metadataKey: key] }
        set { upstream[metadataKey: key] = newValue }
    }

    public func log(event: LogEvent) {
        guard event.level >= control.level else { return }
        upstream.log(event: event)
    }
}
