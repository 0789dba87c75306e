// pidfd_open and pidfd_send_signal (glibc 2.36), which Swift's Glibc module leaves out: a process
// named by a pid file is signalled through a descriptor of its own, so that a pid the kernel gave
// to another process meanwhile is never hit (docs/delivery.md).
#include <sys/pidfd.h>
#include <signal.h>
#include <spawn.h>
// fstatfs and the file systems' magic numbers: a pid file on tmpfs cannot be older than the boot.
#include <sys/vfs.h>
#include <linux/magic.h>

// GNU extensions the headers declare only under _GNU_SOURCE, which a module cannot set: declared
// here as glibc (2.34 and later) defines them.
extern int pipe2(int __pipedes[2], int __flags);
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *__actions, int __from);

// The child's process group as the terminal's foreground group, set in the child before it runs
// (glibc 2.35): an interactive command under `waf-tokend exec` keeps its terminal.
extern int posix_spawn_file_actions_addtcsetpgrp_np(posix_spawn_file_actions_t *__actions, int __tcfd);
#include <sys/wait.h>
// O_PATH (GNU): a directory opened to walk a pid file's path, one component at a time, without a link.
static const int WAF_O_PATH = 010000000;
