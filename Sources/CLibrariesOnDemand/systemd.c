// The libsystemd functions the daemon calls, loaded on the first call (loader.c): libsystemd brings
// libgcrypt, liblzma, liblz4, libzstd and libcap with it, half a millisecond of every exec that a
// run outside systemd (`--version`, `--check-config`, `exec` in a container) never needs. What a
// start under systemd asks (readiness, the watchdog, socket activation, the journal) is spoken by
// systemd-protocols.c instead; what is left here is D-Bus, for `reload: UNIT`, and sd_notify to an
// address of a newer kind.
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include "loader.h"

#include <stdlib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

static struct waf_library libsystemd = {"libsystemd.so.0", "systemd's notifications, socket activation, journal and D-Bus"};

// The library's own sd_notify, for an address of a kind systemd-protocols.c leaves to it.
ON_DEMAND_AS(&libsystemd, int, waf_systemd_notify_loaded, sd_notify, (int unset_environment, const char *state), (unset_environment, state))
// The delivery action `reload: UNIT`: systemd's ReloadUnit over D-Bus (WAFSystemd/UnitReload.swift).
ON_DEMAND(&libsystemd, int, sd_bus_open_system, (sd_bus **ret), (ret))
ON_DEMAND(&libsystemd, sd_bus *, sd_bus_flush_close_unref, (sd_bus *bus), (bus))
ON_DEMAND(&libsystemd, int, sd_bus_call, (sd_bus *bus, sd_bus_message *m, uint64_t usec, sd_bus_error *ret_error, sd_bus_message **reply),
          (bus, m, usec, ret_error, reply))
ON_DEMAND(&libsystemd, int, sd_bus_message_new_method_call,
          (sd_bus *bus, sd_bus_message **m, const char *destination, const char *path, const char *interface, const char *member),
          (bus, m, destination, path, interface, member))
ON_DEMAND(&libsystemd, int, sd_bus_message_set_allow_interactive_authorization, (sd_bus_message *m, int b), (m, b))
ON_DEMAND(&libsystemd, int, sd_bus_message_append_basic, (sd_bus_message *m, char type, const void *p), (m, type, p))
ON_DEMAND(&libsystemd, sd_bus_message *, sd_bus_message_unref, (sd_bus_message *m), (m))
ON_DEMAND_VOID(&libsystemd, sd_bus_error_free, (sd_bus_error *e), (e))
