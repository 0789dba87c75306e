// OpenSSL's libssl from Debian, for TLS on the proxy's loop of its own (WAFProxyLoop): a client
// session over memory BIOs. The wrappers stand for macros Swift cannot call.
#include <openssl/err.h>
#include <openssl/ssl.h>

static inline long waf_ssl_set_server_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
// Client sessions are kept by the caller (one per server name, TLSClientContext), never in the
// context's own cache: with it, every TLS 1.3 ticket of every connection stayed there (about 9 KiB
// each, two a connection, up to 20,480 of them) for as long as the context lived.
static inline long waf_ssl_ctx_set_session_cache_client(SSL_CTX *context) {
    return SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
}
static inline long waf_ssl_ctx_set_min_tls12(SSL_CTX *context) { return SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION); }
static inline long waf_ssl_ctx_set_max_version(SSL_CTX *context, int version) { return SSL_CTX_set_max_proto_version(context, version); }
// Buffers released while a connection is idle (as nginx sets it): an idle pooled connection
// then holds OpenSSL's state, not its 34 KiB of record buffers. A write may be retried with the
// same bytes at another address.
static inline long waf_ssl_ctx_set_lean_modes(SSL_CTX *context) {
    return SSL_CTX_set_mode(context, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}
