#define _GNU_SOURCE
#define OPENSSL_SUPPRESS_DEPRECATED
// The anchors of the proof-of-work benchmark, through OpenSSL's libcrypto:
//   sha256: the fixed prefix hashed once (the midstate), then per nonce a copy of that state, the
//           upper-case hex nonce written in place, one update and the final; the leading zero
//           bits counted on the raw digest. One or two compressions per nonce (SHA extensions).
//   pbkdf2: PKCS5_PBKDF2_HMAC(SHA-256, 1000 rounds, 32 bytes) per nonce, salt the first 12 bytes
//           of the checksum.
// Every worker thread takes its own range of nonces; nothing is shared on the hot path.
//
//   pow sha256|pbkdf2 THREADS SECONDS BASE CHECKSUM    prints: nonces per second
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *base, *checksum, *type;
static double seconds;
static volatile int sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int hex(unsigned long value, char *out) {  // upper case, no padding
    char digits[20];
    int n = 0;
    do { digits[n++] = "0123456789ABCDEF"[value & 15]; value >>= 4; } while (value);
    for (int i = 0; i < n; i++) out[i] = digits[n - 1 - i];
    return n;
}

static int zeros(const unsigned char *digest) {
    int count = 0;
    for (int i = 0; i < 32; i++) {
        if (digest[i]) return count + __builtin_clz(digest[i]) - 24;
        count += 8;
    }
    return count;
}

static void *work(void *argument) {
    unsigned long nonce = (unsigned long)argument << 40, done = 0, zeroBits = 0;
    size_t length = strlen(base);
    double end = now() + seconds;
    unsigned char digest[32];
    if (strcmp(type, "sha256") == 0) {
        SHA256_CTX prefix;
        SHA256_Init(&prefix);
        SHA256_Update(&prefix, base, length);
        char digits[20];
        while (now() < end) {
            for (int i = 0; i < 4096; i++, nonce++) {
                SHA256_CTX context = prefix;
                SHA256_Update(&context, digits, hex(nonce, digits));
                SHA256_Final(digest, &context);
                zeroBits += zeros(digest);
            }
            done += 4096;
        }
    } else {
        char *password = malloc(length + 20);
        memcpy(password, base, length);
        while (now() < end) {
            for (int i = 0; i < 8; i++, nonce++) {
                int n = hex(nonce, password + length);
                PKCS5_PBKDF2_HMAC(password, length + n, (const unsigned char *)checksum, 12, 1000, EVP_sha256(), 32, digest);
                zeroBits += zeros(digest);
            }
            done += 8;
        }
    }
    // One write to the shared sink per thread: one per nonce made the threads fight over its cache
    // line (the 2-thread anchor ran at 0.65x of twice one thread).
    sink += zeroBits;
    return (void *)done;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: pow sha256|pbkdf2 THREADS SECONDS BASE CHECKSUM\n");
        return 64;
    }
    type = argv[1];
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    checksum = argv[5];
    char *joined = malloc(strlen(argv[4]) + strlen(argv[5]) + 1);
    strcpy(joined, argv[4]);
    strcat(joined, argv[5]);
    base = joined;
    pthread_t workers[64];
    double started = now();
    for (long i = 0; i < threads; i++) pthread_create(&workers[i], NULL, work, (void *)i);
    unsigned long total = 0;
    for (int i = 0; i < threads; i++) {
        void *done;
        pthread_join(workers[i], &done);
        total += (unsigned long)done;
    }
    printf("%.0f\n", total / (now() - started));
    return 0;
}
