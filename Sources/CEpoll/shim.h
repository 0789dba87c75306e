// epoll, eventfd, timerfd and accept4, which Swift's Glibc module leaves out: the proxy's loop of
// its own (WAFProxyLoop) waits on them.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

// accept4 is declared only under _GNU_SOURCE, and defining that here would make the system
// headers this module sees differ from those of the modules beside it (CLibSSL's fd_set): so
// declared by hand, as glibc has it.
extern int accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

/// A connection from `listener`, non-blocking and closed on exec, or -1 (errno says why).
static inline int waf_accept(int listener) { return accept4(listener, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC); }
