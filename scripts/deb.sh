#!/usr/bin/env bash
# make deb: builds out/waf-tokend_<version>_amd64.deb with debhelper (compat 13) from the static
# release build, and checks it with lintian. The version is deploy/debian/changelog's, and must be
# the one the binaries print.
#
#   scripts/deb.sh                    the package of this tree
#   DEB_VERSION=0.3.0+t1 scripts/deb.sh  the same binaries under another version (the upgrade test)
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n '1s/^waf-tokend (\([^)]*\)).*/\1/p' deploy/debian/changelog)
scripts/swift-release.sh >/dev/null
bin=$(scripts/swift-release.sh --show-bin-path)
printed=$("$bin/waf-tokend" --version)
if [ "$printed" != "$version" ]; then
    echo "error: waf-tokend --version prints $printed, deploy/debian/changelog says $version" >&2
    exit 1
fi
package_version=${DEB_VERSION:-$version}

work=$(mktemp -d /tmp/waf-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
stage="$work/waf-tokend-$package_version"
mkdir -p "$stage/build" "$stage/config"
for product in waf-tokend waf-tokenctl waf-token-service; do cp "$bin/$product" "$stage/build/"; done
scripts/generated-docs.sh "$bin" "$stage/build"
cp config/waf-tokend.yaml "$stage/config/"
cp -a deploy/debian "$stage/debian"
cp systemd/waf-tokend.service systemd/waf-tokend.socket "$stage/debian/"
# The proxy socket template: installed, enabled per provider by the operator (docs/systemd.md).
cp systemd/waf-tokend-proxy@.socket "$stage/build/"
cp systemd/waf-tokend.sysusers.conf "$stage/debian/waf-tokend.sysusers"
cp systemd/waf-tokend.tmpfiles.conf "$stage/debian/waf-tokend.tmpfiles"
if [ "$package_version" != "$version" ]; then
    { printf 'waf-tokend (%s) bookworm; urgency=medium\n\n  * Rebuilt as %s.\n\n -- waf-tokend maintainers <waf-tokend@example.com>  %s\n\n' \
        "$package_version" "$package_version" "$(date -R)"; cat deploy/debian/changelog; } > "$stage/debian/changelog"
fi

(cd "$stage" && dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1) || { tail -40 "$work/build.log"; exit 1; }
mkdir -p out
deb="out/waf-tokend_${package_version}_amd64.deb"
cp "$work/waf-tokend_${package_version}_amd64.deb" "$deb"
# Lintian at its default level; every override in deploy/debian/waf-tokend.lintian-overrides says why.
lintian --fail-on error,warning "$deb"
echo "$deb: $(stat -c %s "$deb") bytes"
dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Installed-Size\|Depends\):/  \1:/p'
