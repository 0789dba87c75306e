import Logging
import WAFDaemonTransport
import WAFProviderRegistry
import WAFServiceManager
import WAFSocketAPI
import WAFTokenStorage

/// The daemon's long-lived parts, made once at start (`DaemonRuntime.start`) and handed to what
/// starts, reloads and stops providers: one value instead of a dozen parameters each.
struct DaemonParts: Sendable {
    let fetcher: ReloadableTokenFetcher
    let persistence: TokenPersistence
    let metrics: DaemonMetrics
    let broadcaster: EventBroadcaster
    let generation: SnapshotGeneration
    let providers: ProviderSet
    let proxies: ProxyControllers
    let status: StatusReporter
    let api: APIContext
    let listeners: APIListeners
    let notifier: any ServiceNotifier
    /// What connections may hold of their peers' bytes (`limits.bufferedBytes`, TENANT-12).
    let budget: MemoryBudget
    /// Each provider's delivery actions (`sinks.onToken`).
    let hooks: DeliveryHooks
    /// Each provider's token canary (`canary.url`).
    let canaries: Canaries
    let logger: Logger
}
