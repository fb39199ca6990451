#!/bin/sh
# Fails when testdata/triage/ is not what tools/triage/gen_fixtures.py makes
# (someone edited a fixture by hand, or changed the generator and not the data).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python3 "$ROOT/tools/triage/gen_fixtures.py" --out "$TMP"
diff -r "$ROOT/testdata/triage" "$TMP" >/dev/null || {
  echo "testdata/triage differs from tools/triage/gen_fixtures.py output; regenerate:" >&2
  echo "  python3 tools/triage/gen_fixtures.py" >&2
  diff -rq "$ROOT/testdata/triage" "$TMP" >&2
  exit 1
}
echo "testdata/triage matches its generator"
