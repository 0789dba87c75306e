// The OpenSSL functions the daemon calls, defined here and loaded from libssl and libcrypto on the
// first call (the technique of Implib.so). Linked in, the two libraries cost every exec about
// 1.9 ms of CPU (their 17,000 relocations and constructors: docs/performance.md, "Start-up"), paid
// by `--version`, `--check-config` and every start although only an https upstream (the proxy's
// TLS) or a proof-of-work challenge (SHA-256) needs them. Each definition is checked against
// OpenSSL's own prototype by the compiler; the library's name comes from the headers it was built
// against (libssl.so.3 for OpenSSL 3). The Debian package depends on libssl3 by name, since
// dpkg-shlibdeps no longer sees it among the binary's needed libraries.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "COpenSSLOnDemand.h"

#include <dlfcn.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define WAF_SONAME(name) "lib" name ".so." OPENSSL_MSTR(OPENSSL_VERSION_MAJOR)

static _Atomic(void *) libssl_handle;
static _Atomic(void *) libcrypto_handle;

// The solvers need libcrypto only; TLS needs libssl, which brings libcrypto with it.
static void *waf_openssl(_Atomic(void *) *slot, const char *soname) {
    void *handle = atomic_load_explicit(slot, memory_order_acquire);
    if (handle != NULL) return handle;
    handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        // No way to go on: the caller holds a TLS connection or a challenge it cannot answer. A
        // missing library is an installation fault, not a bug: status 1 with one line (SIDECAR.md's
        // exit codes), not abort's core dump.
        fprintf(stderr, "error: cannot load %s, which TLS upstreams and proof-of-work challenges need: %s\n", soname, dlerror());
        _exit(1);
    }
    // Two first calls at once load it twice; dlopen counts references, and the same address comes back.
    atomic_store_explicit(slot, handle, memory_order_release);
    return handle;
}

bool waf_openssl_is_loaded(void) {
    return atomic_load_explicit(&libssl_handle, memory_order_acquire) != NULL ||
           atomic_load_explicit(&libcrypto_handle, memory_order_acquire) != NULL;
}

static void *waf_openssl_symbol(bool ssl, const char *name) {
    const char *soname = ssl ? WAF_SONAME("ssl") : WAF_SONAME("crypto");
    void *symbol = dlsym(ssl ? waf_openssl(&libssl_handle, soname) : waf_openssl(&libcrypto_handle, soname), name);
    if (symbol == NULL) {
        fprintf(stderr, "error: %s has no %s: %s\n", soname, name, dlerror());
        _exit(1);
    }
    return symbol;
}

// LIB RET NAME PARAMS ARGS: defines NAME with OpenSSL's prototype, calling LIB's NAME with ARGS.
#define ON_DEMAND(lib, ret, name, params, args)                                                         \
    ret name params {                                                                              \
        static _Atomic(__typeof__(&name)) resolved;                                                \
        __typeof__(&name) function = atomic_load_explicit(&resolved, memory_order_acquire);        \
        if (function == NULL) {                                                                    \
            function = (__typeof__(&name))waf_openssl_symbol(lib, #name);                               \
            atomic_store_explicit(&resolved, function, memory_order_release);                      \
        }                                                                                          \
        return function args;                                                                      \
    }
#define ON_DEMAND_VOID(lib, name, params, args)                                                         \
    void name params {                                                                             \
        static _Atomic(__typeof__(&name)) resolved;                                                \
        __typeof__(&name) function = atomic_load_explicit(&resolved, memory_order_acquire);        \
        if (function == NULL) {                                                                    \
            function = (__typeof__(&name))waf_openssl_symbol(lib, #name);                               \
            atomic_store_explicit(&resolved, function, memory_order_release);                      \
        }                                                                                          \
        function args;                                                                             \
    }

// libcrypto: the solvers' SHA-256 midstates (WAFChallenge), memory BIOs and errors (WAFProxyLoop).
ON_DEMAND(false, int, SHA256_Init, (SHA256_CTX *c), (c))
ON_DEMAND(false, int, SHA256_Update, (SHA256_CTX *c, const void *data, size_t len), (c, data, len))
ON_DEMAND(false, int, SHA256_Final, (unsigned char *md, SHA256_CTX *c), (md, c))
ON_DEMAND(false, int, BIO_new_bio_pair, (BIO **bio1, size_t writebuf1, BIO **bio2, size_t writebuf2), (bio1, writebuf1, bio2, writebuf2))
ON_DEMAND(false, int, BIO_free, (BIO *a), (a))
ON_DEMAND(false, int, BIO_read, (BIO *b, void *data, int dlen), (b, data, dlen))
ON_DEMAND(false, int, BIO_write, (BIO *b, const void *data, int dlen), (b, data, dlen))
ON_DEMAND(false, size_t, BIO_ctrl_pending, (BIO *b), (b))
ON_DEMAND(false, size_t, BIO_ctrl_get_write_guarantee, (BIO *b), (b))
ON_DEMAND(false, unsigned long, ERR_get_error, (void), ())
ON_DEMAND_VOID(false, ERR_clear_error, (void), ())
ON_DEMAND_VOID(false, ERR_error_string_n, (unsigned long e, char *buf, size_t len), (e, buf, len))
ON_DEMAND(false, const char *, X509_verify_cert_error_string, (long n), (n))

// libssl: the proxy's TLS client sessions (WAFProxyLoop) and the tests' server peer (WAFProxyLoopTestKit).
ON_DEMAND(true, const SSL_METHOD *, TLS_client_method, (void), ())
ON_DEMAND(true, const SSL_METHOD *, TLS_server_method, (void), ())
ON_DEMAND(true, SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *meth), (meth))
ON_DEMAND_VOID(true, SSL_CTX_free, (SSL_CTX *ctx), (ctx))
ON_DEMAND(true, long, SSL_CTX_ctrl, (SSL_CTX *ctx, int cmd, long larg, void *parg), (ctx, cmd, larg, parg))
ON_DEMAND(true, int, SSL_CTX_load_verify_locations, (SSL_CTX *ctx, const char *CAfile, const char *CApath), (ctx, CAfile, CApath))
ON_DEMAND(true, int, SSL_CTX_set_default_verify_paths, (SSL_CTX *ctx), (ctx))
ON_DEMAND_VOID(true, SSL_CTX_set_verify, (SSL_CTX *ctx, int mode, SSL_verify_cb callback), (ctx, mode, callback))
ON_DEMAND(true, int, SSL_CTX_use_PrivateKey_file, (SSL_CTX *ctx, const char *file, int type), (ctx, file, type))
ON_DEMAND(true, int, SSL_CTX_use_certificate_chain_file, (SSL_CTX *ctx, const char *file), (ctx, file))
ON_DEMAND(true, SSL *, SSL_new, (SSL_CTX *ctx), (ctx))
ON_DEMAND_VOID(true, SSL_free, (SSL *ssl), (ssl))
ON_DEMAND(true, long, SSL_ctrl, (SSL *ssl, int cmd, long larg, void *parg), (ssl, cmd, larg, parg))
ON_DEMAND_VOID(true, SSL_set_bio, (SSL *s, BIO *rbio, BIO *wbio), (s, rbio, wbio))
ON_DEMAND_VOID(true, SSL_set_connect_state, (SSL *s), (s))
ON_DEMAND_VOID(true, SSL_set_accept_state, (SSL *s), (s))
ON_DEMAND_VOID(true, SSL_set_quiet_shutdown, (SSL *ssl, int mode), (ssl, mode))
ON_DEMAND(true, int, SSL_set1_host, (SSL *s, const char *hostname), (s, hostname))
ON_DEMAND(true, int, SSL_set_session, (SSL *to, SSL_SESSION *session), (to, session))
ON_DEMAND(true, SSL_SESSION *, SSL_get1_session, (SSL *ssl), (ssl))
ON_DEMAND(true, int, SSL_session_reused, (const SSL *s), (s))
ON_DEMAND_VOID(true, SSL_SESSION_free, (SSL_SESSION *ses), (ses))
ON_DEMAND(true, int, SSL_SESSION_is_resumable, (const SSL_SESSION *s), (s))
ON_DEMAND(true, int, SSL_do_handshake, (SSL *s), (s))
ON_DEMAND(true, int, SSL_is_init_finished, (const SSL *s), (s))
ON_DEMAND(true, int, SSL_read, (SSL *ssl, void *buf, int num), (ssl, buf, num))
ON_DEMAND(true, int, SSL_write, (SSL *ssl, const void *buf, int num), (ssl, buf, num))
ON_DEMAND(true, int, SSL_has_pending, (const SSL *s), (s))
ON_DEMAND(true, int, SSL_get_error, (const SSL *s, int ret_code), (s, ret_code))
ON_DEMAND(true, long, SSL_get_verify_result, (const SSL *ssl), (ssl))
ON_DEMAND(true, int, SSL_shutdown, (SSL *s), (s))
