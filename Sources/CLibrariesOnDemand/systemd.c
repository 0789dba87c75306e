// The libsystemd functions the daemon calls, loaded on the first call (loader.c): libsystemd brings
// libgcrypt, liblzma, liblz4, libzstd and libcap with it, half a millisecond of every exec that a
// run outside systemd (`--version`, `--check-config`, `exec` in a container) never needs.
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include "loader.h"

#include <stdlib.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

static struct waf_library libsystemd = {"libsystemd.so.0", "systemd's notifications, socket activation, journal and D-Bus"};

// Without the variables systemd sets, each of these three answers 0 and reads nothing else
// (sd_notify(3), sd_listen_fds(3), sd_watchdog_enabled(3)); unsetting absent variables changes
// nothing. Answered here without loading the library: a start outside systemd asks all three.
static int notify_loaded(int unset_environment, const char *state);
static int listen_fds_with_names_loaded(int unset_environment, char ***names);
static int watchdog_enabled_loaded(int unset_environment, uint64_t *usec);

int sd_notify(int unset_environment, const char *state) {
    if (getenv("NOTIFY_SOCKET") == NULL) return 0;
    return notify_loaded(unset_environment, state);
}

int sd_listen_fds_with_names(int unset_environment, char ***names) {
    if (getenv("LISTEN_PID") == NULL && getenv("LISTEN_FDS") == NULL && getenv("LISTEN_FDNAMES") == NULL) return 0;
    return listen_fds_with_names_loaded(unset_environment, names);
}

int sd_watchdog_enabled(int unset_environment, uint64_t *usec) {
    if (getenv("WATCHDOG_USEC") == NULL && getenv("WATCHDOG_PID") == NULL) return 0;
    return watchdog_enabled_loaded(unset_environment, usec);
}

// The same three, from the library.
ON_DEMAND_AS(&libsystemd, static int, notify_loaded, sd_notify, (int unset_environment, const char *state), (unset_environment, state))
ON_DEMAND_AS(&libsystemd, static int, listen_fds_with_names_loaded, sd_listen_fds_with_names, (int unset_environment, char ***names), (unset_environment, names))
ON_DEMAND_AS(&libsystemd, static int, watchdog_enabled_loaded, sd_watchdog_enabled, (int unset_environment, uint64_t *usec), (unset_environment, usec))

// Socket activation's check of each passed descriptor (WAFSystemd/SocketActivation.swift).
ON_DEMAND(&libsystemd, int, sd_is_socket, (int fd, int family, int type, int listening), (fd, family, type, listening))
// The journal's native protocol (WAFSystemd/JournalLogHandler.swift).
ON_DEMAND(&libsystemd, int, sd_journal_sendv, (const struct iovec *iov, int n), (iov, n))
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
