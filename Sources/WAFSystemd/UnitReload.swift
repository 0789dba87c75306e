import CSystemd
import WAFServiceManager

#if canImport(Glibc)
import Glibc
#endif

/// `ReloadUnit(unit, "replace")` of systemd's manager over the system bus, through libsystemd's
/// sd-bus: no shell, no `systemctl` child. The daemon's user needs systemd's permission for that
/// unit: a polkit rule that grants exactly it (docs/delivery.md). The plug-in's, as the notifier
/// is: the delivery action (`reload: UNIT`) is described below, and only this file links sd-bus.
public struct SystemdUnitReloader: UnitReloader {
    public init() {}

    public func reload(unit: String) throws(UnitReloadFailure) {
        var bus: OpaquePointer?
        let opened = sd_bus_open_system(&bus)
        guard opened >= 0, let bus else { throw UnitReloadFailure("cannot reach the system bus: \(String(cString: strerror(-opened)))") }
        defer { sd_bus_flush_close_unref(bus) }
        var message: OpaquePointer?
        var result = sd_bus_message_new_method_call(
            bus, &message, "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager", "ReloadUnit")
        guard result >= 0, let message else { throw UnitReloadFailure("cannot make the D-Bus call: \(String(cString: strerror(-result)))") }
        defer { sd_bus_message_unref(message) }
        // Interactive authorisation off: polkit answers from its rules, never by asking someone.
        _ = sd_bus_message_set_allow_interactive_authorization(message, 0)
        for argument in [unit, "replace"] {
            result = argument.withCString { sd_bus_message_append_basic(message, CChar(UInt8(ascii: "s")), $0) }
            guard result >= 0 else { throw UnitReloadFailure("cannot make the D-Bus call: \(String(cString: strerror(-result)))") }
        }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        result = sd_bus_call(bus, message, 30_000_000, &error, &reply)
        if let reply { sd_bus_message_unref(reply) }
        guard result >= 0 else {
            let name = error.name.map { String(cString: $0) } ?? "error"
            let text = error.message.map { String(cString: $0) } ?? String(cString: strerror(-result))
            throw UnitReloadFailure("systemd refused to reload \(unit): \(name): \(text)")
        }
    }
}
