#!/usr/bin/env bash
# Writes the key table's reference into docs/configuration.md, between its markers, from the
# built daemon (`waf-tokend --print-configuration-reference`): run after adding or changing a key.
# `make test` fails while the page and the table differ.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$("${SWIFT:-swift}" build --show-bin-path)
"$bin/waf-tokend" --print-configuration-reference > .build/reference.md
python3 - <<'PY'
page = open("docs/configuration.md").read()
start = page.index("<!-- configuration reference:")
end = page.index("<!-- end of configuration reference -->")
reference = open(".build/reference.md").read().strip("\n")
assert reference.endswith("<!-- end of configuration reference -->"), "the reference ends with its end marker"
open("docs/configuration.md", "w").write(page[:start] + reference + page[end + len("<!-- end of configuration reference -->"):])
PY
echo "docs/configuration.md: reference updated"
