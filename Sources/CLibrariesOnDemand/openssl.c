// The OpenSSL functions the daemon calls, loaded from libssl and libcrypto on the first call
// (loader.c): only an https upstream (the proxy's TLS) or a proof-of-work challenge (SHA-256)
// needs them. The libraries' names come from the headers this was built against (libssl.so.3 for
// OpenSSL 3).
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "loader.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define WAF_SONAME(name) "lib" name ".so." OPENSSL_MSTR(OPENSSL_VERSION_MAJOR)

// TLS needs libssl, which brings libcrypto with it; the solvers need libcrypto only.
static struct waf_library libssl = {WAF_SONAME("ssl"), "TLS upstreams"};
static struct waf_library libcrypto = {WAF_SONAME("crypto"), "TLS upstreams and proof-of-work challenges"};

// libcrypto: the solvers' SHA-256 midstates (WAFChallenge), memory BIOs and errors (WAFProxyLoop).
ON_DEMAND(&libcrypto, int, SHA256_Init, (SHA256_CTX *c), (c))
ON_DEMAND(&libcrypto, int, SHA256_Update, (SHA256_CTX *c, const void *data, size_t len), (c, data, len))
ON_DEMAND(&libcrypto, int, SHA256_Final, (unsigned char *md, SHA256_CTX *c), (md, c))
ON_DEMAND(&libcrypto, int, BIO_new_bio_pair, (BIO **bio1, size_t writebuf1, BIO **bio2, size_t writebuf2), (bio1, writebuf1, bio2, writebuf2))
ON_DEMAND(&libcrypto, int, BIO_free, (BIO *a), (a))
ON_DEMAND(&libcrypto, int, BIO_read, (BIO *b, void *data, int dlen), (b, data, dlen))
ON_DEMAND(&libcrypto, int, BIO_write, (BIO *b, const void *data, int dlen), (b, data, dlen))
ON_DEMAND(&libcrypto, size_t, BIO_ctrl_pending, (BIO *b), (b))
ON_DEMAND(&libcrypto, size_t, BIO_ctrl_get_write_guarantee, (BIO *b), (b))
ON_DEMAND(&libcrypto, unsigned long, ERR_get_error, (void), ())
ON_DEMAND_VOID(&libcrypto, ERR_clear_error, (void), ())
ON_DEMAND_VOID(&libcrypto, ERR_error_string_n, (unsigned long e, char *buf, size_t len), (e, buf, len))
ON_DEMAND(&libcrypto, const char *, X509_verify_cert_error_string, (long n), (n))

// libssl: the proxy's TLS client sessions (WAFProxyLoop) and the tests' server peer (WAFProxyLoopTestKit).
ON_DEMAND(&libssl, const SSL_METHOD *, TLS_client_method, (void), ())
ON_DEMAND(&libssl, const SSL_METHOD *, TLS_server_method, (void), ())
ON_DEMAND(&libssl, SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *meth), (meth))
ON_DEMAND_VOID(&libssl, SSL_CTX_free, (SSL_CTX *ctx), (ctx))
ON_DEMAND(&libssl, long, SSL_CTX_ctrl, (SSL_CTX *ctx, int cmd, long larg, void *parg), (ctx, cmd, larg, parg))
ON_DEMAND(&libssl, int, SSL_CTX_load_verify_locations, (SSL_CTX *ctx, const char *CAfile, const char *CApath), (ctx, CAfile, CApath))
ON_DEMAND(&libssl, int, SSL_CTX_set_default_verify_paths, (SSL_CTX *ctx), (ctx))
ON_DEMAND_VOID(&libssl, SSL_CTX_set_verify, (SSL_CTX *ctx, int mode, SSL_verify_cb callback), (ctx, mode, callback))
ON_DEMAND(&libssl, int, SSL_CTX_use_PrivateKey_file, (SSL_CTX *ctx, const char *file, int type), (ctx, file, type))
ON_DEMAND(&libssl, int, SSL_CTX_use_certificate_chain_file, (SSL_CTX *ctx, const char *file), (ctx, file))
ON_DEMAND(&libssl, SSL *, SSL_new, (SSL_CTX *ctx), (ctx))
ON_DEMAND_VOID(&libssl, SSL_free, (SSL *ssl), (ssl))
ON_DEMAND(&libssl, long, SSL_ctrl, (SSL *ssl, int cmd, long larg, void *parg), (ssl, cmd, larg, parg))
ON_DEMAND_VOID(&libssl, SSL_set_bio, (SSL *s, BIO *rbio, BIO *wbio), (s, rbio, wbio))
ON_DEMAND_VOID(&libssl, SSL_set_connect_state, (SSL *s), (s))
ON_DEMAND_VOID(&libssl, SSL_set_accept_state, (SSL *s), (s))
ON_DEMAND_VOID(&libssl, SSL_set_quiet_shutdown, (SSL *ssl, int mode), (ssl, mode))
ON_DEMAND(&libssl, int, SSL_set1_host, (SSL *s, const char *hostname), (s, hostname))
ON_DEMAND(&libssl, int, SSL_set_session, (SSL *to, SSL_SESSION *session), (to, session))
ON_DEMAND(&libssl, SSL_SESSION *, SSL_get1_session, (SSL *ssl), (ssl))
ON_DEMAND(&libssl, int, SSL_session_reused, (const SSL *s), (s))
ON_DEMAND_VOID(&libssl, SSL_SESSION_free, (SSL_SESSION *ses), (ses))
ON_DEMAND(&libssl, int, SSL_SESSION_is_resumable, (const SSL_SESSION *s), (s))
ON_DEMAND(&libssl, int, SSL_do_handshake, (SSL *s), (s))
ON_DEMAND(&libssl, int, SSL_is_init_finished, (const SSL *s), (s))
ON_DEMAND(&libssl, int, SSL_read, (SSL *ssl, void *buf, int num), (ssl, buf, num))
ON_DEMAND(&libssl, int, SSL_write, (SSL *ssl, const void *buf, int num), (ssl, buf, num))
ON_DEMAND(&libssl, int, SSL_has_pending, (const SSL *s), (s))
ON_DEMAND(&libssl, int, SSL_get_error, (const SSL *s, int ret_code), (s, ret_code))
ON_DEMAND(&libssl, long, SSL_get_verify_result, (const SSL *ssl), (ssl))
ON_DEMAND(&libssl, int, SSL_shutdown, (SSL *s), (s))
