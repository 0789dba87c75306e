#!/usr/bin/env bash
# Installs waf-tokend from the static release build (make release) under $DESTDIR$PREFIX:
# binaries, systemd units, sysusers.d and tmpfiles.d snippets, the example configuration (never over
# an existing one) and man pages made by ArgumentParser's generate-manual.
#
#   PREFIX=/usr DESTDIR=/tmp/stage scripts/install.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/usr}
DESTDIR=${DESTDIR:-}
SYSCONFDIR=${SYSCONFDIR:-/etc}
SCRATCH=${SCRATCH:-.build-static}
SWIFT=${SWIFT:-swift}
products=(waf-tokend waf-tokenctl waf-token-service)

for product in "${products[@]}"; do
    if [ ! -x "$SCRATCH/release/$product" ]; then
        echo "error: $SCRATCH/release/$product is missing; run 'make release' first" >&2
        exit 1
    fi
done

root="$DESTDIR$PREFIX"
install -d "$root/bin" "$root/lib/systemd/system" "$root/lib/sysusers.d" "$root/lib/tmpfiles.d" \
    "$root/share/man/man1" "$DESTDIR$SYSCONFDIR/waf-tokend"

# Debug information off (a third of the size), symbols kept so that backtraces name functions.
for product in "${products[@]}"; do
    install -m 0755 "$SCRATCH/release/$product" "$root/bin/$product"
    strip --strip-debug "$root/bin/$product"
done

# The units name /usr/bin/waf-tokend and /etc/waf-tokend: follow PREFIX and SYSCONFDIR.
for unit in waf-tokend.service waf-tokend.socket; do
    sed -e "s|/usr/bin/waf-tokend|$PREFIX/bin/waf-tokend|g" -e "s|/etc/waf-tokend|$SYSCONFDIR/waf-tokend|g" \
        "systemd/$unit" > "$root/lib/systemd/system/$unit"
    chmod 0644 "$root/lib/systemd/system/$unit"
done
install -m 0644 systemd/waf-tokend.sysusers.conf "$root/lib/sysusers.d/waf-tokend.conf"
install -m 0644 systemd/waf-tokend.tmpfiles.conf "$root/lib/tmpfiles.d/waf-tokend.conf"

config="$DESTDIR$SYSCONFDIR/waf-tokend/waf-tokend.yaml"
if [ -e "$config" ]; then
    install -m 0644 config/waf-tokend.yaml "$config.example"
    echo "kept the existing $config; the shipped example is $config.example"
else
    install -m 0644 config/waf-tokend.yaml "$config"
fi

# Man pages from the binaries' own ArgumentParser definitions.
"$SWIFT" build --scratch-path "$SCRATCH" --product generate-manual >/dev/null
manuals=$(mktemp -d)
trap 'rm -rf "$manuals"' EXIT
"$SCRATCH/debug/generate-manual" "$SCRATCH/release/waf-tokend" --output-directory "$manuals"
"$SCRATCH/debug/generate-manual" "$SCRATCH/release/waf-tokenctl" --multi-page --output-directory "$manuals"
"$SCRATCH/debug/generate-manual" "$SCRATCH/release/waf-token-service" --output-directory "$manuals"
install -m 0644 "$manuals"/*.1 "$root/share/man/man1/"

echo "installed under ${DESTDIR:-/}: $PREFIX/bin, $PREFIX/lib/systemd/system, $PREFIX/lib/sysusers.d, $PREFIX/lib/tmpfiles.d, $PREFIX/share/man/man1, $SYSCONFDIR/waf-tokend"
if [ -z "$DESTDIR" ]; then
    echo "next: systemd-sysusers; systemd-tmpfiles --create waf-tokend.conf; edit $config; systemctl daemon-reload; systemctl enable --now waf-tokend.socket (or waf-tokend.service)"
fi
