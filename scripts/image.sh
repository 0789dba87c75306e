#!/usr/bin/env bash
# make image: the container image waf-tokend:<version>, built offline FROM scratch with podman
# from the static release build and the few files of Debian's packages the binaries need: the
# daemon (its --demo mode has the local token service built in) and waf-tokenctl.
#
#   scripts/image.sh            prints the image's name and size
set -euo pipefail
cd "$(dirname "$0")/.."
export CONTAINERS_CONF=$PWD/deploy/container/containers.conf

scripts/swift-release.sh >/dev/null
bin=$(scripts/swift-release.sh --show-bin-path)
version=$("$bin/waf-tokend" --version)
image=localhost/waf-tokend:$version

work=$(mktemp -d /tmp/waf-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/usr/sbin "$root"/usr/bin "$root"/etc/waf-tokend "$root"/etc/ssl/certs "$root"/usr/share/publicsuffix \
    "$root"/run/waf-tokend "$root"/var/lib/waf-tokend "$root"/tmp
install -m 0755 "$bin/waf-tokend" "$root/usr/sbin/"
install -m 0755 "$bin/waf-tokenctl" "$root/usr/bin/"
strip "$root/usr/sbin/waf-tokend" "$root/usr/bin/waf-tokenctl"

# The shared libraries the binaries link, those they load on first use (libssl, libcrypto, libpsl,
# libyaml and libsystemd, Sources/CLibrariesOnDemand: ldd cannot see them) with theirs, and the loader.
on_demand=()
# libgcc_s.so.1 too: the binaries link libgcc's unwinder in, so ldd no longer lists it, but glibc
# loads it itself for pthread_exit and pthread_cancel, and aborts without it.
for soname in libssl.so.3 libsystemd.so.0 libpsl.so.5 libyaml-0.so.2 libgcc_s.so.1; do
    # awk reads to the end: one that exits early makes ldconfig die of SIGPIPE, which pipefail reports.
    path=$(ldconfig -p | awk -v soname="$soname" '$1 == soname && /x86-64/ && path == "" { path = $NF } END { print path }')
    [ -n "$path" ] || { echo "image: $soname not found; install its Debian package" >&2; exit 1; }
    on_demand+=("$path")
done
# ldd heads each file's list with its path when given several: those lines are not libraries.
for library in "${on_demand[@]}" $(ldd "$bin/waf-tokend" "$bin/waf-tokenctl" "${on_demand[@]}" | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }' | sort -u); do
    mkdir -p "$root$(dirname "$library")"
    cp -L "$library" "$root$library"
done
cp -L /usr/share/publicsuffix/public_suffix_list.dafsa "$root/usr/share/publicsuffix/"
cp -L /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
install -m 0644 config/waf-tokend.yaml "$root/etc/waf-tokend/"
printf 'root:x:0:0:root:/:/sbin/nologin\nwaf-tokend:x:65532:65532:AWS WAF token provider:/var/lib/waf-tokend:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nwaf-token:x:65532:\n' > "$root/etc/group"
chmod 1777 "$root/tmp"
chmod 0750 "$root/run/waf-tokend"
chmod 0700 "$root/var/lib/waf-tokend"
tar -C "$root" --numeric-owner --owner=0 --group=0 -cf "$work/root.tar" --exclude=./run/waf-tokend --exclude=./var/lib/waf-tokend .
# The directories the daemon writes belong to its user.
tar -C "$root" --numeric-owner --owner=65532 --group=65532 -rf "$work/root.tar" ./run/waf-tokend ./var/lib/waf-tokend
cp deploy/container/Containerfile "$work/"

podman build --quiet --build-arg VERSION="$version" -t "$image" -f "$work/Containerfile" "$work" >/dev/null
size=$(podman image inspect --format '{{.Size}}' "$image")
echo "$image: $((size / 1000000)) MB ($size bytes)"
