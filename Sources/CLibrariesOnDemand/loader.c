// Libraries loaded with dlopen on the first call of one of their functions (the technique of
// Implib.so), for the libraries only some runs need: linked in, libssl and libcrypto cost every
// exec about 1.9 ms of CPU and libsystemd with its five libraries about 0.5 ms (their relocations
// and constructors: docs/performance.md, "Start-up"), paid by `--version`, `--check-config`, a
// container's `exec` and every start. The Debian package depends on them by name and the image
// copies them, since neither dpkg-shlibdeps nor ldd sees them among the binary's needed libraries.
#include "loader.h"
#include "CLibrariesOnDemand.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>

static _Atomic(void (*)(void)) failure_handler;
static atomic_flag failing = ATOMIC_FLAG_INIT;
static atomic_bool handling_failure;
static atomic_flag exit_hook_installed = ATOMIC_FLAG_INIT;

void waf_library_wait_if_failing(void) {
    if (atomic_load(&handling_failure)) {
        for (;;) pause();
    }
}

// The same at exit(), for a path that does not call it first. Handlers registered after this
// one (OpenSSL's, on its first use) run before it: hence the explicit call too.
static void waf_library_wait_at_exit(void) { waf_library_wait_if_failing(); }

void waf_library_on_failure(void (*handler)(void)) {
    atomic_store_explicit(&failure_handler, handler, memory_order_release);
    if (!atomic_flag_test_and_set(&exit_hook_installed)) atexit(waf_library_wait_at_exit);
}

// An installation fault, not a bug: status 1 ("anything else", SIDECAR.md's exit codes), after the
// handler has ended what the process started.
static _Noreturn void waf_library_fail(void) {
    // The handler's own thread failing again (it touched a missing library) must not wait for
    // itself: it ends the process as it is.
    static _Thread_local bool handling;
    if (handling) _exit(1);
    if (atomic_flag_test_and_set(&failing)) {
        for (;;) pause();
    }
    handling = true;
    atomic_store(&handling_failure, true);
    void (*handler)(void) = atomic_load_explicit(&failure_handler, memory_order_acquire);
    if (handler != NULL) handler();
    _exit(1);
}

static void *waf_library_handle(struct waf_library *library) {
    void *handle = atomic_load_explicit(&library->handle, memory_order_acquire);
    if (handle != NULL) return handle;
    handle = dlopen(library->soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        // No way to go on: the caller holds a connection, a challenge or a message it cannot finish.
        fprintf(stderr, "error: cannot load %s, which %s need: %s\n", library->soname, library->needed_by, dlerror());
        waf_library_fail();
    }
    // Two first calls at once load it twice; dlopen counts references, and the same address comes back.
    atomic_store_explicit(&library->handle, handle, memory_order_release);
    return handle;
}

void *waf_library_symbol(struct waf_library *library, const char *name) {
    void *symbol = dlsym(waf_library_handle(library), name);
    if (symbol == NULL) {
        fprintf(stderr, "error: %s has no %s: %s\n", library->soname, name, dlerror());
        waf_library_fail();
    }
    return symbol;
}
