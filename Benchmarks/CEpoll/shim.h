// epoll, which Swift's Glibc module leaves out: for the relay sketch's loop of its own.
#include <sys/epoll.h>
