// Debian libraries the binaries load on first use rather than at exec (loader.c): their functions
// are defined in this target with the libraries' own prototypes, so the Swift code calls them as
// the libraries' headers (CLibSSL, COpenSSL, CSystemd) declare them. Nothing to import from here.
#ifndef WAF_LIBRARIES_ON_DEMAND_H
#define WAF_LIBRARIES_ON_DEMAND_H
#endif
