import ServiceLifecycle

/// The proxy's part in the daemon's life: it serves (or not) as the controller was told, and on
/// the graceful stop finishes the requests in flight, bounded, and closes.
struct ProxyService: Service {
    let controller: ProxyController

    func run() async {
        try? await gracefulShutdown()
        await controller.stop()
    }
}
