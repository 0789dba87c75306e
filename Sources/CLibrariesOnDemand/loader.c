// Libraries loaded with dlopen on the first call of one of their functions (the technique of
// Implib.so), for the libraries only some runs need: linked in, libssl and libcrypto cost every
// exec about 1.9 ms of CPU and libsystemd with its five libraries about 0.5 ms (their relocations
// and constructors: docs/performance.md, "Start-up"), paid by `--version`, `--check-config`, a
// container's `exec` and every start. The Debian package depends on them by name and the image
// copies them, since neither dpkg-shlibdeps nor ldd sees them among the binary's needed libraries.
#include "loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

static void *waf_library_handle(struct waf_library *library) {
    void *handle = atomic_load_explicit(&library->handle, memory_order_acquire);
    if (handle != NULL) return handle;
    handle = dlopen(library->soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        // No way to go on: the caller holds a connection, a challenge or a message it cannot finish.
        fprintf(stderr, "error: cannot load %s, which %s need: %s\n", library->soname, library->needed_by, dlerror());
        _exit(1);
    }
    // Two first calls at once load it twice; dlopen counts references, and the same address comes back.
    atomic_store_explicit(&library->handle, handle, memory_order_release);
    return handle;
}

void *waf_library_symbol(struct waf_library *library, const char *name) {
    void *symbol = dlsym(waf_library_handle(library), name);
    if (symbol == NULL) {
        fprintf(stderr, "error: %s has no %s: %s\n", library->soname, name, dlerror());
        _exit(1);
    }
    return symbol;
}
