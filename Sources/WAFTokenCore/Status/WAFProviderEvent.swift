#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where a cached token came from.
public enum WAFTokenOrigin: String, Sendable, Hashable {
    /// Fetched from the token service.
    case fetched
    /// Given to `loadTokenIntoProvider` (e.g. restored from the daemon's state directory).
    case loaded
}

/// Something the provider did, for observers (the daemon's event stream, sinks, sd_notify status).
public enum WAFProviderEvent: Sendable {
    /// A new token is cached (or, with background refresh disabled, was handed out).
    case tokenUpdated(WAFToken, origin: WAFTokenOrigin)
    /// The token was dropped: the identity changed (docs/rules.md, RELOAD-2).
    case tokenDropped
    /// The lifecycle state changed, or background refresh was paused (LIFE-3).
    case lifecycleChanged(WAFProviderStatus.Lifecycle)
    /// A fetch attempt failed; `nextAttemptAt` is nil when the provider gave up (RET-4).
    case refreshFailed(SdkError, consecutiveFailures: Int, nextAttemptAt: Date?)
    /// A refresh fell due while the app is inactive; it waits for the app's return (LIFE-2).
    case refreshHeld(dueAt: Date)
    /// User code in a result callback threw (TOK-6); the provider went on.
    case callbackFailed(String)
}
