// OpenSSL's libssl for the relay sketch's TLS upstreams: what the proxy's own loop would use
// (issue 39), measured before it is built. The wrappers stand for macros Swift cannot call.
#include <openssl/err.h>
#include <openssl/ssl.h>

static inline long sketch_set_server_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
