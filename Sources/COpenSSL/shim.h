// OpenSSL's libcrypto, for the proof-of-work hot loops only: the low-level SHA-256 context can be
// copied as a plain struct (the midstate of the fixed prefix), which swift-crypto's SHA256 cannot
// without an allocation per copy. These functions are deprecated in OpenSSL 3 in favour of EVP,
// whose per-call provider lookup is what the midstate loop avoids.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/evp.h>
#include <openssl/sha.h>
