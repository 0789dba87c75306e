// The loader the stubs of openssl.c and systemd.c share.
#ifndef WAF_LOADER_H
#define WAF_LOADER_H
#include <stdatomic.h>

struct waf_library {
    const char *soname;
    /// What it is for, in the one line a missing library ends the process with.
    const char *needed_by;
    _Atomic(void *) handle;
};

/// `name` in `library`, loaded on the first call; a missing library or symbol ends the process
/// with status 1 and one line (an installation fault, not a bug: SIDECAR.md's exit codes).
void *waf_library_symbol(struct waf_library *library, const char *name);

// LIBRARY RET LOCAL NAME PARAMS ARGS: defines LOCAL with the prototype of the library's NAME (the
// compiler checks the two agree), calling LIBRARY's NAME with ARGS; the address is looked up once.
#define ON_DEMAND_AS(library, ret, local, name, params, args)                                      \
    ret local params {                                                                             \
        static _Atomic(__typeof__(&name)) resolved;                                                \
        __typeof__(&name) function = atomic_load_explicit(&resolved, memory_order_acquire);        \
        if (function == NULL) {                                                                    \
            function = (__typeof__(&name))waf_library_symbol(library, #name);                      \
            atomic_store_explicit(&resolved, function, memory_order_release);                      \
        }                                                                                          \
        return function args;                                                                      \
    }
/// libsystemd's own sd_notify (systemd.c), for an address systemd-protocols.c leaves to it.
int waf_systemd_notify_loaded(int unset_environment, const char *state);

#define ON_DEMAND(library, ret, name, params, args) ON_DEMAND_AS(library, ret, name, name, params, args)
#define ON_DEMAND_VOID(library, name, params, args)                                                \
    void name params {                                                                             \
        static _Atomic(__typeof__(&name)) resolved;                                                \
        __typeof__(&name) function = atomic_load_explicit(&resolved, memory_order_acquire);        \
        if (function == NULL) {                                                                    \
            function = (__typeof__(&name))waf_library_symbol(library, #name);                      \
            atomic_store_explicit(&resolved, function, memory_order_release);                      \
        }                                                                                          \
        function args;                                                                             \
    }

#endif
