// Debian libraries the binaries load on first use rather than at exec (loader.c): their functions
// are defined in this target with the libraries' own prototypes, so the Swift code calls them as
// the libraries' headers (CLibSSL, COpenSSL, CSystemd) declare them.
#ifndef WAF_LIBRARIES_ON_DEMAND_H
#define WAF_LIBRARIES_ON_DEMAND_H

/// Called once, on the failing thread, before a missing library or symbol ends the process: what
/// the process started must not outlive it (exec's child group, a run action's group) and what it
/// made for itself must not stay (exec's private token file). Other threads that fail meanwhile
/// wait for it to end the process.
void waf_library_on_failure(void (*handler)(void));

/// Returns at once, unless the handler is running: then never (it ends the process with status 1).
/// For a clean stop that ends while the handler runs (a SIGTERM meanwhile), before it exits with
/// its own status (0 or 143) with the handler's work half done.
void waf_library_wait_if_failing(void);

#include <sys/uio.h>

/// `sd_journal_sendv`'s entry, sent to the journal socket at `path` rather than journald's
/// (systemd-protocols.c): for the tests, which read what a journal would get.
int waf_journal_sendv_to(const char *path, const struct iovec *iov, int n);

#endif
