import ServiceLifecycle

/// The proxies' part in the daemon's life: each serves (or not) as its provider's controller was
/// told, and on the graceful stop finishes the requests in flight, bounded, and closes.
struct ProxyService: Service {
    let providers: ProviderSet

    func run() async {
        try? await gracefulShutdown()
        await withTaskGroup(of: Void.self) { group in
            for entry in providers.all { group.addTask { await entry.proxy.stop() } }
        }
    }
}
