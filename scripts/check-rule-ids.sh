#!/usr/bin/env bash
# Every rule id cited in the code or the tests has a heading in docs/, and every id with a heading
# has a test whose name carries it (func RET2_…). Run by `make test`; prints what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

pattern='\b(OBJ|CFG|TOK|RET|LIFE|COOK|RELOAD|STATE|MULTI|TENANT|HOOK|EXEC|CANARY|EGRESS)-?[0-9]+\b'
cited=$(grep -rhoE "$pattern" Sources Tests | sed -E 's/([A-Z]+)-?([0-9]+)/\1-\2/' | sort -u)
documented=$(grep -hE '^#+ ' docs/*.md | grep -oE "$pattern" | sort -u)
status=0
for id in $cited; do
    if ! grep -qx "$id" <<<"$documented"; then
        echo "rule id $id is cited in the code or the tests but has no heading in docs/" >&2
        status=1
    fi
done
for id in $documented; do
    if ! grep -rqE "func ${id//-/}_" Tests; then
        echo "rule id $id has a heading in docs/ but no test named for it (func ${id//-/}_…)" >&2
        status=1
    fi
done
[ $status -eq 0 ] && echo "rule ids: $(wc -w <<<"$documented") documented and tested, $(wc -w <<<"$cited") cited"
exit $status
