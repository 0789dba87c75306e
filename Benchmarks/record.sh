#!/usr/bin/env bash
# Runs a benchmark and writes what it printed into the docs page, between the page's markers
# <!-- figures:NAME --> and <!-- /figures:NAME -->, under a line that says when, where and at which
# commit: figures are written by the run that measured them, never by hand.
#
#   Benchmarks/record.sh NAME PAGE COMMAND...      (e.g. proxy docs/performance.md Benchmarks/proxy-bench.sh)
#
# A run that fails records nothing. NO_RECORD=1 only prints.
set -euo pipefail
cd "$(dirname "$0")/.."
name=$1 page=$2
shift 2
output=$(mktemp)
trap 'rm -f "$output"' EXIT
"$@" | tee "$output"
[ "${NO_RECORD:-}" = 1 ] && exit 0
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
# Changes outside docs/ make the figures those of a tree no commit holds.
git diff --quiet HEAD -- . ':!docs' 2>/dev/null || commit="$commit with uncommitted changes"
machine="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, Linux $(uname -r)"
python3 - "$name" "$page" "$output" "$(date -u +%Y-%m-%d)" "$commit" "$machine" "$*" <<'PY'
import sys
name, page, output, day, commit, machine, command = sys.argv[1:]
begin, end = f"<!-- figures:{name} -->", f"<!-- /figures:{name} -->"
text = open(page).read()
if begin not in text or end not in text:
    sys.exit(f"error: {page} has no {begin} … {end} block for these figures")
figures = open(output).read().rstrip("\n")
block = f"{begin}\nMeasured {day} on {machine}, commit {commit}, by `{command}`:\n\n```text\n{figures}\n```\n{end}"
head, rest = text.split(begin, 1)
open(page, "w").write(head + block + rest.split(end, 1)[1])
print(f"recorded in {page} ({begin})")
PY
