// What a start under systemd asks of libsystemd, spoken here by the protocols systemd documents as
// stable and meant to be spoken without the library (sd_notify(3), sd_watchdog_enabled(3),
// sd_listen_fds(3), sd_is_socket(3), systemd.io's "Native Journal Protocol"), each as libsystemd
// 252 speaks it: a start that loaded libsystemd and its five libraries for its first log line,
// its passed sockets and READY=1 paid about 1.5 ms before it (docs/performance.md). Without
// systemd's variables each answers 0 and reads nothing else.
#define _GNU_SOURCE
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include "CLibrariesOnDemand.h"
#include "loader.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

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

// `path` as an AF_UNIX address: a path, or with '@' an abstract name. Its length counts a path's
// NUL and not an abstract name's (unix(7)); 0 when it does not fit.
static socklen_t unix_address(const char *path, struct sockaddr_un *address) {
    size_t length = strlen(path);
    if (length < 2 || length >= sizeof(address->sun_path)) return 0;
    memset(address, 0, sizeof(*address));
    address->sun_family = AF_UNIX;
    memcpy(address->sun_path, path, length);
    if (path[0] == '@') address->sun_path[0] = '\0';
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + length + (path[0] == '/'));
}

// MARK: sd_notify and the watchdog

int sd_notify(int unset_environment, const char *state) {
    const char *address = getenv("NOTIFY_SOCKET");
    if (address == NULL) return 0;
    // A newer systemd's address kinds (vsock:) are the library's.
    if (address[0] != '/' && address[0] != '@') return waf_systemd_notify_loaded(unset_environment, state);
    int result = -EINVAL;
    struct sockaddr_un destination;
    socklen_t size = unix_address(address, &destination);
    if (state != NULL && size > 0) {
        int descriptor = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (descriptor < 0) {
            result = -errno;
        } else {
            struct iovec piece = {.iov_base = (void *)state, .iov_len = strlen(state)};
            struct msghdr message = {.msg_name = &destination, .msg_namelen = size, .msg_iov = &piece, .msg_iovlen = 1};
            result = sendmsg(descriptor, &message, MSG_NOSIGNAL) < 0 ? -errno : 1;
            close(descriptor);
        }
    }
    if (unset_environment) unsetenv("NOTIFY_SOCKET");
    return result;
}

// WATCHDOG_USEC a positive number of microseconds; WATCHDOG_PID, when set, this process's pid, else
// the watchdog is another's. The unit sets WatchdogSec=, so every start under systemd asks this.
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

// MARK: Socket activation

// How many descriptors from 3 on are this process's (LISTEN_PID, LISTEN_FDS), each made
// close-on-exec; 0 when none are, negative on a malformed variable.
static int listen_fds(void) {
    const char *pid = getenv("LISTEN_PID");
    if (pid == NULL) return 0;
    long long owner = parse_decimal(pid, 1ULL << 31);
    if (owner <= 0) return -EINVAL;
    if (owner != (long long)getpid()) return 0;
    const char *count = getenv("LISTEN_FDS");
    if (count == NULL) return 0;
    long long passed = parse_decimal(count, (unsigned long long)(INT_MAX - SD_LISTEN_FDS_START));
    if (passed <= 0) return -EINVAL;
    for (int descriptor = SD_LISTEN_FDS_START; descriptor < SD_LISTEN_FDS_START + passed; descriptor++) {
        int flags = fcntl(descriptor, F_GETFD);
        if (flags < 0 || fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) < 0) return -errno;
    }
    return (int)passed;
}

static void free_names(char **names, int count) {
    for (int index = 0; index < count; index++) free(names[index]);
    free(names);
}

// `names` gets one name per descriptor (LISTEN_FDNAMES split at each ':', or "unknown" for each
// without it), NULL-terminated, each to be freed with free(); none but the descriptors' count
// must match.
int sd_listen_fds_with_names(int unset_environment, char ***names) {
    if (getenv("LISTEN_PID") == NULL && getenv("LISTEN_FDS") == NULL && getenv("LISTEN_FDNAMES") == NULL) return 0;
    const char *listed = getenv("LISTEN_FDNAMES");
    char *copy = listed == NULL ? NULL : strdup(listed);
    int count = listen_fds();
    if (unset_environment) {
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
    }
    if (listed != NULL && copy == NULL) return -ENOMEM;
    if (count <= 0 || names == NULL) {
        free(copy);
        return count;
    }
    char **result = calloc((size_t)count + 1, sizeof(char *));
    int found = 0;
    bool failed = result == NULL;
    if (!failed && copy != NULL && copy[0] != '\0') {
        for (char *start = copy, *end = copy;; end++) {
            if (*end != ':' && *end != '\0') continue;
            bool last = *end == '\0';
            if (found < count && (result[found] = strndup(start, (size_t)(end - start))) == NULL) failed = true;
            found++;
            if (last) break;
            start = end + 1;
        }
    } else if (!failed && copy == NULL) {
        for (; found < count; found++) {
            if ((result[found] = strdup("unknown")) == NULL) failed = true;
        }
    }
    free(copy);
    if (failed || found != count) {
        if (result != NULL) free_names(result, found < count ? found : count);
        return failed ? -ENOMEM : -EINVAL;
    }
    *names = result;
    return count;
}

// Whether `fd` is a socket of `family` (0: any), `type` (0: any), listening or not (`listening`
// negative: either way).
int sd_is_socket(int fd, int family, int type, int listening) {
    if (fd < 0) return -EBADF;
    if (family < 0 || type < 0) return -EINVAL;
    struct stat status;
    if (fstat(fd, &status) < 0) return -errno;
    if (!S_ISSOCK(status.st_mode)) return 0;
    int value = 0;
    socklen_t length = sizeof(value);
    if (type != 0) {
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &value, &length) < 0) return -errno;
        if (length != sizeof(value)) return -EINVAL;
        if (value != type) return 0;
    }
    if (listening >= 0) {
        length = sizeof(value);
        if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) < 0) return -errno;
        if (length != sizeof(value)) return -EINVAL;
        if (!value != !listening) return 0;
    }
    if (family > 0) {
        struct sockaddr_storage address;
        length = sizeof(address);
        if (getsockname(fd, (struct sockaddr *)&address, &length) < 0) return -errno;
        if (length < sizeof(sa_family_t)) return -EINVAL;
        return address.ss_family == family;
    }
    return 1;
}

// MARK: The journal

static atomic_int journal_descriptor = -1;

// One socket for every entry, made on the first, with the send buffer as large as the kernel lets
// an unprivileged process make it (libsystemd asks for 8 MiB too).
static int journal_socket(void) {
    int descriptor = atomic_load(&journal_descriptor);
    if (descriptor >= 0) return descriptor;
    descriptor = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (descriptor < 0) return -errno;
    int size = 8 * 1024 * 1024;
    (void)setsockopt(descriptor, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    int unset = -1;
    if (!atomic_compare_exchange_strong(&journal_descriptor, &unset, descriptor)) {
        close(descriptor);
        return unset;
    }
    return descriptor;
}

// An entry too large for one datagram: written to a sealed memfd, whose descriptor goes instead.
static int journal_send_as_file(int descriptor, struct msghdr *entry) {
    int file = memfd_create("journal-data", MFD_ALLOW_SEALING | MFD_CLOEXEC);
    if (file < 0) return -errno;
    size_t total = 0;
    for (size_t index = 0; index < entry->msg_iovlen; index++) total += entry->msg_iov[index].iov_len;
    ssize_t written = writev(file, entry->msg_iov, (int)entry->msg_iovlen);
    int result = 0;
    if (written < 0) {
        result = -errno;
    } else if ((size_t)written != total) {
        result = -EIO;
    } else if (fcntl(file, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
        result = -errno;
    } else {
        union {
            struct cmsghdr header;
            char bytes[CMSG_SPACE(sizeof(int))];
        } control;
        memset(&control, 0, sizeof(control));
        struct msghdr message = {
            .msg_name = entry->msg_name, .msg_namelen = entry->msg_namelen, .msg_control = &control, .msg_controllen = sizeof(control)};
        struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
        rights->cmsg_level = SOL_SOCKET;
        rights->cmsg_type = SCM_RIGHTS;
        rights->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(rights), &file, sizeof(int));
        if (sendmsg(descriptor, &message, MSG_NOSIGNAL) < 0) result = errno == ENOENT ? 0 : -errno;
    }
    close(file);
    return result;
}

int waf_journal_sendv_to(const char *path, const struct iovec *iov, int n) {
    if (iov == NULL || n <= 0) return -EINVAL;
    struct sockaddr_un address;
    socklen_t size = unix_address(path, &address);
    if (size == 0) return -EINVAL;
    // Each field is one piece and its newline, or four (name, newline, length, value) and the
    // newline when its value holds a newline; then SYSLOG_IDENTIFIER when the fields lack it.
    struct iovec *pieces = malloc(sizeof(struct iovec) * (5 * (size_t)n + 3));
    uint64_t *lengths = malloc(sizeof(uint64_t) * (size_t)n);
    int result = 0, count = 0;
    bool identified = false;
    if (pieces == NULL || lengths == NULL) result = -ENOMEM;
    for (int index = 0; result == 0 && index < n; index++) {
        const char *field = iov[index].iov_base;
        size_t length = iov[index].iov_len;
        const char *equals = field == NULL || length <= 1 ? NULL : memchr(field, '=', length);
        if (equals == NULL || equals == field) {
            result = -EINVAL;
            break;
        }
        identified = identified || (equals - field == 17 && memcmp(field, "SYSLOG_IDENTIFIER", 17) == 0);
        const char *newline = memchr(field, '\n', length);
        if (newline != NULL) {
            if (newline < equals) {
                result = -EINVAL;
                break;
            }
            size_t name = (size_t)(equals - field);
            lengths[index] = htole64(length - name - 1);
            pieces[count++] = (struct iovec){.iov_base = (void *)field, .iov_len = name};
            pieces[count++] = (struct iovec){.iov_base = "\n", .iov_len = 1};
            pieces[count++] = (struct iovec){.iov_base = &lengths[index], .iov_len = sizeof(uint64_t)};
            pieces[count++] = (struct iovec){.iov_base = (void *)(equals + 1), .iov_len = length - name - 1};
        } else {
            pieces[count++] = iov[index];
        }
        pieces[count++] = (struct iovec){.iov_base = "\n", .iov_len = 1};
    }
    if (result == 0 && !identified && program_invocation_short_name != NULL && strchr(program_invocation_short_name, '\n') == NULL) {
        pieces[count++] = (struct iovec){.iov_base = "SYSLOG_IDENTIFIER=", .iov_len = 18};
        pieces[count++] = (struct iovec){.iov_base = program_invocation_short_name, .iov_len = strlen(program_invocation_short_name)};
        pieces[count++] = (struct iovec){.iov_base = "\n", .iov_len = 1};
    }
    int descriptor = result == 0 ? journal_socket() : result;
    if (descriptor < 0) result = descriptor;
    if (result == 0) {
        struct msghdr entry = {.msg_name = &address, .msg_namelen = size, .msg_iov = pieces, .msg_iovlen = (size_t)count};
        if (sendmsg(descriptor, &entry, MSG_NOSIGNAL) < 0) {
            // No journal: nothing to do, as libsystemd does. Too large for a datagram: as a file.
            if (errno == ENOENT) {
                result = 0;
            } else if (errno == EMSGSIZE || errno == ENOBUFS || errno == EAGAIN) {
                result = journal_send_as_file(descriptor, &entry);
            } else {
                result = -errno;
            }
        }
    }
    free(pieces);
    free(lengths);
    return result;
}

int sd_journal_sendv(const struct iovec *iov, int n) {
    int saved = errno;
    int result = waf_journal_sendv_to("/run/systemd/journal/socket", iov, n);
    errno = saved;
    return result;
}
