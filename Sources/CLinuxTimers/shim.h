// timerfd, which Swift's Glibc module leaves out: the provider's timers wait on CLOCK_BOOTTIME,
// which counts the time the machine spends suspended (TOK-9).
#include <sys/timerfd.h>
#include <time.h>
