#!/usr/bin/env bash
# Installs waf-tokend from the static release build (make release) under $DESTDIR$PREFIX:
# the daemon in sbin, the client and the local token service in bin, systemd units, sysusers.d and
# tmpfiles.d snippets, the example configuration (never over an existing one), man pages and
# waf-tokenctl's shell completions. The Debian package (make deb) installs the same.
#
#   PREFIX=/usr DESTDIR=/tmp/stage scripts/install.sh
#
# BIN names another build's binaries: the end-to-end test of `make test` installs the debug build
# (BIN=.build/debug SCRATCH=.build), so that `make test` builds the package once, not twice.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/usr}
DESTDIR=${DESTDIR:-}
SYSCONFDIR=${SYSCONFDIR:-/etc}
SCRATCH=${SCRATCH:-.build-static}
BIN=${BIN:-$SCRATCH/release}
SWIFT=${SWIFT:-swift}
products=(waf-tokend waf-tokenctl waf-token-service)

for product in "${products[@]}"; do
    if [ ! -x "$BIN/$product" ]; then
        echo "error: $BIN/$product is missing; run 'make release' first" >&2
        exit 1
    fi
done

root="$DESTDIR$PREFIX"
install -d "$root/bin" "$root/sbin" "$root/lib/systemd/system" "$root/lib/sysusers.d" "$root/lib/tmpfiles.d" \
    "$root/share/man/man1" "$root/share/bash-completion/completions" "$root/share/zsh/vendor-completions" \
    "$root/share/fish/vendor_completions.d" "$DESTDIR$SYSCONFDIR/waf-tokend"

# Debug information off (a third of the size), symbols kept so that backtraces name functions.
for product in "${products[@]}"; do
    directory=bin
    if [ "$product" = waf-tokend ]; then directory=sbin; fi
    install -m 0755 "$BIN/$product" "$root/$directory/$product"
    strip --strip-debug "$root/$directory/$product"
done

# The units name /usr/sbin/waf-tokend and /etc/waf-tokend: follow PREFIX and SYSCONFDIR.
for unit in waf-tokend.service waf-tokend.socket waf-tokend-proxy@.socket; do
    sed -e "s|/usr/sbin/waf-tokend|$PREFIX/sbin/waf-tokend|g" -e "s|/etc/waf-tokend|$SYSCONFDIR/waf-tokend|g" \
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

# Man pages and completions from the binaries' own ArgumentParser definitions.
generated=$(mktemp -d)
trap 'rm -rf "$generated"' EXIT
SWIFT="$SWIFT" SCRATCH="$SCRATCH" scripts/generated-docs.sh "$BIN" "$generated"
install -m 0644 "$generated"/man/*.1 "$root/share/man/man1/"
install -m 0644 "$generated/completions/waf-tokenctl.bash" "$root/share/bash-completion/completions/waf-tokenctl"
install -m 0644 "$generated/completions/waf-tokenctl.zsh" "$root/share/zsh/vendor-completions/_waf-tokenctl"
install -m 0644 "$generated/completions/waf-tokenctl.fish" "$root/share/fish/vendor_completions.d/waf-tokenctl.fish"

echo "installed under ${DESTDIR:-/}: $PREFIX/bin, $PREFIX/sbin, $PREFIX/lib/systemd/system, $PREFIX/lib/sysusers.d, $PREFIX/lib/tmpfiles.d, $PREFIX/share/man/man1, $SYSCONFDIR/waf-tokend"
if [ -z "$DESTDIR" ]; then
    echo "next: systemd-sysusers; systemd-tmpfiles --create waf-tokend.conf; edit $config; systemctl daemon-reload; systemctl enable --now waf-tokend.socket (or waf-tokend.service)"
fi
