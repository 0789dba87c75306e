// OpenSSL's libssl from Debian, for TLS on the proxy's loop of its own (WAFProxyLoop): a client
// session over memory BIOs. The wrappers stand for macros Swift cannot call.
#include <openssl/err.h>
#include <openssl/ssl.h>

static inline long waf_ssl_set_server_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
static inline long waf_ssl_ctx_set_session_cache_client(SSL_CTX *context) {
    return SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_CLIENT);
}
static inline long waf_ssl_ctx_set_min_tls12(SSL_CTX *context) { return SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION); }
static inline long waf_ssl_ctx_set_max_version(SSL_CTX *context, int version) { return SSL_CTX_set_max_proto_version(context, version); }
