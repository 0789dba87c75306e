import NIOConcurrencyHelpers
import WAFTokenProxy

/// Each provider's proxy controller, by provider name: the listeners see providers through the
/// registry, which knows nothing of proxies; the daemon starts, reloads and stops them through these.
final class ProxyControllers: Sendable {
    private let controllers = NIOLockedValueBox<[String: ProxyController]>([:])

    subscript(name: String) -> ProxyController? {
        controllers.withLockedValue { $0[name] }
    }

    var all: [ProxyController] { controllers.withLockedValue { Array($0.values) } }

    func insert(_ controller: ProxyController, for name: String) {
        controllers.withLockedValue { $0[name] = controller }
    }

    @discardableResult
    func remove(_ name: String) -> ProxyController? {
        controllers.withLockedValue { $0.removeValue(forKey: name) }
    }

    /// Stops every proxy, together.
    func stopAll() async {
        await withTaskGroup(of: Void.self) { group in
            for controller in all { group.addTask { await controller.stop() } }
        }
    }
}
