// epoll, eventfd, timerfd and accept4, which Swift's Glibc module leaves out: the proxy's loop of
// its own (WAFProxyLoop) waits on them.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

// accept4, declared by hand: glibc declares it in <sys/socket.h> only under _GNU_SOURCE, and
// including that header here (with or without it) makes the socket definitions this module's,
// which Swift files that see them through Glibc then cannot find in a clean build. socklen_t is
// an unsigned int. The flags come from Glibc's SOCK_NONBLOCK | SOCK_CLOEXEC.
struct sockaddr;
extern int accept4(int fd, struct sockaddr *address, unsigned int *length, int flags);

// pthread_setname_np, which glibc declares only under _GNU_SOURCE; pthread_t is an unsigned long.
// The loops' threads carry a name in `top -H` and in a core dump.
extern int pthread_setname_np(unsigned long thread, const char *name);

// What the heap holds in use (glibc's mallinfo2): the tests measure what one connection keeps,
// which the memory budget reserves for it (TENANT-12).
#include <malloc.h>
static inline unsigned long waf_heap_in_use(void) { return (unsigned long)mallinfo2().uordblks; }
