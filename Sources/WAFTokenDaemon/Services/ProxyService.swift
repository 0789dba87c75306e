import ServiceLifecycle

/// The proxies' part in the daemon's life: each serves (or not) as its provider's controller was
/// told, and on the graceful stop finishes the requests in flight, bounded, and closes.
struct ProxyService: Service {
    let proxies: ProxyControllers

    func run() async {
        try? await gracefulShutdown()
        await proxies.stopAll()
    }
}
