// The libsystemd functions the daemon calls, loaded on the first call (loader.c): libsystemd brings
// libgcrypt, liblzma, liblz4, libzstd and libcap with it, half a millisecond of every exec that a
// run outside systemd (`--version`, `--check-config`, `exec` in a container) never needs.
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include "loader.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

static struct waf_library libsystemd = {"libsystemd.so.0", "systemd's notifications, socket activation, journal and D-Bus"};

// Without the variables systemd sets, sd_notify, sd_listen_fds_with_names and sd_watchdog_enabled
// answer 0 and read nothing else (sd_notify(3), sd_listen_fds(3), sd_watchdog_enabled(3));
// unsetting absent variables changes nothing. Answered here without loading the library: a start
// outside systemd asks all three. Under systemd, the first and the last are answered here too.
static int notify_loaded(int unset_environment, const char *state);
static int listen_fds_with_names_loaded(int unset_environment, char ***names);

// A datagram of `state` to the AF_UNIX socket `address` names: a path, or with '@' an abstract name.
static int notify_unix(const char *address, const char *state) {
    struct sockaddr_un destination = {.sun_family = AF_UNIX};
    size_t length = strlen(address);
    if (length < 2 || length >= sizeof(destination.sun_path)) return -EINVAL;
    memcpy(destination.sun_path, address, length);
    // A path's length counts its NUL, an abstract name's does not (unix(7)).
    socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + length + (address[0] == '/'));
    if (address[0] == '@') destination.sun_path[0] = '\0';
    int descriptor = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (descriptor < 0) return -errno;
    struct iovec piece = {.iov_base = (void *)state, .iov_len = strlen(state)};
    struct msghdr message = {.msg_name = &destination, .msg_namelen = size, .msg_iov = &piece, .msg_iovlen = 1};
    ssize_t sent = sendmsg(descriptor, &message, MSG_NOSIGNAL);
    int error = errno;
    close(descriptor);
    if (sent < 0) return -error;
    return 1;
}

// sd_notify's protocol itself for the address kinds systemd 252 gives (a path, '@' and an abstract
// name): sd_notify(3) documents the protocol as stable and meant to be spoken without libsystemd.
// READY=1, STATUS= and the watchdog's pings then never load libsystemd and its five libraries,
// about 1.5 ms before READY=1 (docs/performance.md, "Start-up in detail"). An address of another
// kind (a newer systemd's vsock:) goes to the library, which knows it.
int sd_notify(int unset_environment, const char *state) {
    const char *address = getenv("NOTIFY_SOCKET");
    if (address == NULL) return 0;
    if (address[0] != '/' && address[0] != '@') return notify_loaded(unset_environment, state);
    int result = state == NULL ? -EINVAL : notify_unix(address, state);
    if (unset_environment) unsetenv("NOTIFY_SOCKET");
    return result;
}

int sd_listen_fds_with_names(int unset_environment, char ***names) {
    if (getenv("LISTEN_PID") == NULL && getenv("LISTEN_FDS") == NULL && getenv("LISTEN_FDNAMES") == NULL) return 0;
    return listen_fds_with_names_loaded(unset_environment, names);
}

// A decimal number without sign or blanks, below `limit`; -1 for anything else.
static long long parse_decimal(const char *text, unsigned long long limit) {
    if (*text == '\0') return -1;
    unsigned long long value = 0;
    for (const char *digit = text; *digit != '\0'; digit++) {
        if (*digit < '0' || *digit > '9') return -1;
        value = value * 10 + (unsigned long long)(*digit - '0');
        if (value >= limit) return -1;
    }
    return (long long)value;
}

// sd_watchdog_enabled(3), as the library reads the two variables: WATCHDOG_USEC a positive number
// of microseconds, WATCHDOG_PID (when set) this process's pid, else the watchdog is another's.
// The unit sets WatchdogSec=, so every start under systemd asks this.
int sd_watchdog_enabled(int unset_environment, uint64_t *usec) {
    const char *interval = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    int result = 0;
    if (interval != NULL) {
        long long microseconds = parse_decimal(interval, 1ULL << 62);
        long long owner = pid == NULL ? (long long)getpid() : parse_decimal(pid, 1ULL << 31);
        if (microseconds <= 0 || owner <= 0) {
            result = -EINVAL;
        } else if (owner == (long long)getpid()) {
            if (usec != NULL) *usec = (uint64_t)microseconds;
            result = 1;
        }
    }
    if (unset_environment) {
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
    }
    return result;
}

// The library's own, for what the two above leave to it.
ON_DEMAND_AS(&libsystemd, static int, notify_loaded, sd_notify, (int unset_environment, const char *state), (unset_environment, state))
ON_DEMAND_AS(&libsystemd, static int, listen_fds_with_names_loaded, sd_listen_fds_with_names, (int unset_environment, char ***names), (unset_environment, names))

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
