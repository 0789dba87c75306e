#!/usr/bin/env bash
# The release build every shipped binary, package, image and benchmark uses, in .build-static:
# optimised, the Swift runtime linked in (runs without a toolchain), and without SwiftPM's
# --export-dynamic (which only testable executables need; it puts every symbol in the dynamic
# table: 2.5 MB of the daemon, docs/performance.md, "Sizes and memory"); symbols bound at start (-z now, with RELRO: the
# dynamic relocations read-only before main). Linked by the toolchain's lld with packed relative
# relocations (DT_RELR, glibc 2.36): the daemon's 89,534 relocations took 2.1 MB as RELA and take
# 17 KB as RELR, which is 2.2 MB off the daemon and 1.3 MB off waf-tokenctl (docs/performance.md, "Sizes and memory").
#
# libstdc++ and libgcc's unwinder are linked in too (the Swift runtime's C++ needs them): loaded as
# shared libraries they cost every exec their mapping and the binding of libstdc++'s 5,000
# relocations, a quarter of `waf-tokenctl --version`'s CPU (docs/performance.md, "Start-up in detail").
# The toolchain's static-stdlib-args.lnk asks for `-lstdc++` and the clang driver for `-lgcc_s`;
# the linker takes the first file of that name on its search path, and the products folder comes
# before the one where GCC keeps the real ones: so it holds linker scripts by those names that
# point at the archives (GCC's runtime library exception allows it). SwiftPM does not see them:
# after an update of Debian's libstdc++ (a security fix), a clean build links the new one in.
#
#   scripts/swift-release.sh [--product NAME] [--show-bin-path]
#
# Without --product it builds the three shipped executables, not every target: test support
# (WAFTestSupport, WAFTestTraits, the benchmarks) is no part of a release and need not be built for one.
set -euo pipefail
cd "$(dirname "$0")/.."
products=.build-static/$(uname -m)-unknown-linux-gnu/release
mkdir -p "$products"
clang=$(dirname "$(readlink -f "$(command -v "${SWIFT:-swift}")")")/clang
[ -x "$clang" ] || { echo "error: no clang beside ${SWIFT:-swift} ($clang): the toolchain's linker driver finds the C++ archives" >&2; exit 1; }
# script NAME TEXT: a linker script NAME in the products folder, written aside and moved: a link
# running meanwhile reads the old script or the new one, whole.
script() {
    printf '/* scripts/swift-release.sh */\n%s\n' "$2" >"$products/$1.$$"
    mv -f "$products/$1.$$" "$products/$1"
}
for pair in libstdc++.so=libstdc++.a libgcc_s.so=libgcc_eh.a; do
    archive=$("$clang" -print-file-name="${pair#*=}")
    [ -f "$archive" ] || { echo "error: no ${pair#*=} for the static link (Debian's libstdc++-12-dev and libgcc-12-dev have it)" >&2; exit 1; }
    script "${pair%%=*}" "INPUT($archive)"
done
# zlib: AsyncHTTPClient links it for a decompression the daemon never asks for (NIOHTTPCompression),
# and loaded at every exec it cost its mapping and relocations for nothing. A script by its name
# hands the linker the library as needed: recorded only if a symbol of it is used (none is).
zlib=$("$clang" -print-file-name=libz.so.1)
[ -f "$zlib" ] || { echo "error: no libz.so.1 for the link (Debian's zlib1g has it)" >&2; exit 1; }
script libz.so "INPUT(AS_NEEDED($zlib))"
# Concrete generic types' metadata by their accessors, not by mangled name: a name is decoded at
# its first use, and each of its generic requirements (`ManagedAtomic<Bool>`'s `Bool: AtomicValue`,
# a dictionary's `Hashable` key) looked up in the binary's 7,700 conformance records, about 80 µs
# each; an accessor is handed the conformance. A start asked 40 such lookups before READY=1 and
# asks 12 with it (mostly the dynamic casts of NIO's pipeline); 10 % off exec → READY=1 for 0.25 MB
# of text (docs/performance.md, "Start-up in detail").
build() {
    "${SWIFT:-swift}" build -c release --static-swift-stdlib --scratch-path .build-static -Xlinker --no-export-dynamic -Xlinker -z -Xlinker now \
        -Xswiftc -use-ld=lld -Xlinker -z -Xlinker pack-relative-relocs \
        -Xswiftc -Xfrontend -Xswiftc -disable-concrete-type-metadata-mangled-name-accessors "$@"
}
if (($# > 0)); then
    build "$@"
else
    for product in waf-tokend waf-tokenctl waf-token-service; do build --product "$product"; done
fi
