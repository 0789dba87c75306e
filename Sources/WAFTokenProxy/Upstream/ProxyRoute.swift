import WAFDaemonTransport
import WAFProxyLoop

/// What one request reads once at its start, so that a reload never changes a request midway.
/// A class: a request reads it under a lock several times, and one reference is one retain
/// where a copy of the settings was dozens.
final class ProxyRoute: Sendable {
    let settings: ProxySettings
    let connection: ConnectionSettings
    /// For an https upstream; made once per route, not per connection.
    let tls: TLSClientContext?
    /// Pooled connections of an older route are not reused.
    let generation: Int

    init(settings: ProxySettings, connection: ConnectionSettings, tls: TLSClientContext?, generation: Int) {
        self.settings = settings
        self.connection = connection
        self.tls = tls
        self.generation = generation
    }
}
