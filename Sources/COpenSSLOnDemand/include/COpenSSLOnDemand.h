// libssl and libcrypto, loaded on first use (openssl_on_demand.c): whether they are loaded yet.
#ifndef WAF_OPENSSL_ON_DEMAND_H
#define WAF_OPENSSL_ON_DEMAND_H
#include <stdbool.h>

bool waf_openssl_is_loaded(void);

#endif
