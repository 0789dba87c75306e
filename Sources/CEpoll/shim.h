// epoll, eventfd, timerfd and accept4, which Swift's Glibc module leaves out: the proxy's loop of
// its own (WAFProxyLoop) waits on them.
#define _GNU_SOURCE 1
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>

/// A connection from `listener`, non-blocking and closed on exec, or -1 (errno says why).
static inline int waf_accept(int listener) { return accept4(listener, 0, 0, SOCK_NONBLOCK | SOCK_CLOEXEC); }
