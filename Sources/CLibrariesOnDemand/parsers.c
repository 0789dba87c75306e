// libpsl for a domain name's Public Suffix List check (CFG-2) and libyaml for the configuration
// file, loaded on the first call (loader.c): `--version`, a start with an IP address for its
// domain and no configuration file, and waf-tokenctl need neither. Linked, the two, and libidn2
// and libunistring that libpsl brings, cost every exec about 0.5 ms of CPU (docs/performance.md,
// "Start-up in detail"). Their sonames are Debian's since bookworm.
#include "loader.h"

#include <libpsl.h>
#include <yaml.h>

static struct waf_library libpsl = {"libpsl.so.5", "Public Suffix List checks of domain names"};
static struct waf_library libyaml = {"libyaml-0.so.2", "configuration files"};

// PublicSuffixList (WAFTokenCore).
ON_DEMAND(&libpsl, const psl_ctx_t *, psl_builtin, (void), ())
ON_DEMAND(&libpsl, psl_ctx_t *, psl_latest, (const char *fname), (fname))
ON_DEMAND(&libpsl, int, psl_is_public_suffix2, (const psl_ctx_t *psl, const char *domain, int type), (psl, domain, type))

// YAMLDocument (WAFDaemonConfiguration).
ON_DEMAND(&libyaml, int, yaml_parser_initialize, (yaml_parser_t *parser), (parser))
ON_DEMAND_VOID(&libyaml, yaml_parser_delete, (yaml_parser_t *parser), (parser))
ON_DEMAND_VOID(&libyaml, yaml_parser_set_input_string, (yaml_parser_t *parser, const unsigned char *input, size_t size),
               (parser, input, size))
ON_DEMAND(&libyaml, int, yaml_parser_parse, (yaml_parser_t *parser, yaml_event_t *event), (parser, event))
ON_DEMAND_VOID(&libyaml, yaml_event_delete, (yaml_event_t *event), (event))
