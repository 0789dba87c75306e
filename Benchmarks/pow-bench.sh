#!/usr/bin/env bash
# Proof-of-work nonces/s of the solvers beside the C anchors, in the same run on the same base:
# OpenSSL's SHA-256 from a copied midstate and OpenSSL's PKCS5_PBKDF2_HMAC, called from C
# (Benchmarks/c-anchors/pow.c, built here with the system compiler). Each figure is the median of
# RUNS runs of RUN_SECONDS, ours and the anchor's alternating; on one core and on all cores. Then the
# option the SHA-256 solver does not take, swift-crypto's SHA256, against the same anchor.
#
#   Benchmarks/pow-bench.sh        (RUNS=3 RUN_SECONDS=2)
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
SECONDS_PER_RUN=${RUN_SECONDS:-2}
work=$(mktemp -d /tmp/waf-pow-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

scripts/swift-release.sh --product waf-pow-bench >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
ours=$(scripts/swift-release.sh --show-bin-path)/waf-pow-bench
gcc -O2 -o "$work/pow" Benchmarks/c-anchors/pow.c -lcrypto -lpthread

# A realistic base: the input of the protocol's test vector 2 and the mobile checksum.
input=eyJ2ZXJzaW9uIjoxLCJ1YmlkIjoiMGNkY2VlMzItY2E3Ni00ZTQ3LWJlNmYtNzRjMWFjMGNiMTY0IiwiYXR0ZW1wdF9pZCI6IjcyYTI4NDlhLTAxZjctNGZlMS1iMzMyLTIyODk3OGVmODVhYSIsImNyZWF0ZV90aW1lIjoiMjAyNC0wNS0zMFQwMDo1Nzo0OS4wODc4MDgzMTJaIiwiZGlmZmljdWx0eSI6NCwiY2hhbGxlbmdlX3R5cGUiOiJIYXNoY2FzaFNjcnlwdCJ9
checksum=3763231C
cores=$(nproc)

median() { tr ' ' '\n' | sort -n | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }

# compare LABEL OUR_VARIANT ANCHOR_VARIANT THREADS: one table row.
compare() {
    local label=$1 variant=$2 anchor=$3 threads=$4 a=() b=()
    for ((run = 0; run < RUNS; run++)); do
        a+=("$("$ours" "$variant" "$threads" "$SECONDS_PER_RUN" "$input" "$checksum")")
        b+=("$("$work/pow" "$anchor" "$threads" "$SECONDS_PER_RUN" "$input" "$checksum")")
    done
    local mine theirs
    mine=$(echo "${a[@]}" | median)
    theirs=$(echo "${b[@]}" | median)
    printf "%-28s %7s %14s %14s %7.2fx   %s | %s\n" "$label" "$threads" "$mine" "$theirs" "$(awk -v a="$mine" -v b="$theirs" 'BEGIN {print a / b}')" \
        "${a[*]}" "${b[*]}"
}

echo "proof-of-work nonces/s, median of $RUNS runs of $SECONDS_PER_RUN s, $cores cores, base of $((${#input} + ${#checksum})) bytes; $(openssl version)"
printf "%-28s %7s %14s %14s %8s   %s\n" solver threads "waf-tokend" "C anchor" ratio "runs (ours | anchor)"
compare "SHA-256 (OpenSSL midstate)" sha256 sha256 1
compare "SHA-256 (OpenSSL midstate)" sha256 sha256 "$cores"
compare "PBKDF2 (swift-crypto)" pbkdf2 pbkdf2 1
compare "PBKDF2 (swift-crypto)" pbkdf2 pbkdf2 "$cores"
echo "the option not taken (the anchor is OpenSSL's PBKDF2 itself):"
compare "SHA-256 (swift-crypto copy)" sha256-swift-crypto sha256 1
