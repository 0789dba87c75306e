#!/usr/bin/env bash
# Writes what the executables say about themselves into DIR: man pages (man/*.1, from
# ArgumentParser's generate-manual) and shell completions (completions/waf-tokenctl.{bash,zsh,fish},
# from --generate-completion-script). For scripts/install.sh and scripts/deb.sh.
#
#   [SCRATCH=.build-static] [MANUAL=PATH] scripts/generated-docs.sh BIN_DIR DIR
#
# generate-manual is built (debug) in SCRATCH, the build folder that already holds ArgumentParser,
# unless MANUAL names one already built (a test that runs under `swift test`, which holds the
# build folder's lock, cannot build).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1
out=$2
SWIFT=${SWIFT:-swift}
mkdir -p "$out/man" "$out/completions"
SCRATCH=${SCRATCH:-.build-static}
manual=${MANUAL:-}
if [ -z "$manual" ]; then
    "$SWIFT" build --scratch-path "$SCRATCH" --product generate-manual >/dev/null
    manual=$("$SWIFT" build --scratch-path "$SCRATCH" --show-bin-path)/generate-manual
fi
"$manual" "$bin/waf-tokend" --output-directory "$out/man"
"$manual" "$bin/waf-tokenctl" --output-directory "$out/man"
"$manual" "$bin/waf-token-service" --output-directory "$out/man"
# A completion file is sourced, not run: no #! line.
for shell in bash zsh fish; do
    "$bin/waf-tokenctl" --generate-completion-script "$shell" | sed '1{/^#!/d}' > "$out/completions/waf-tokenctl.$shell"
done
