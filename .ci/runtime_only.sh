#!/usr/bin/env bash
# The package alone, as a user installs it: its wheel into a clean venv with plain pip (no
# extras, no lock), then `paimond --help` and a real compaction, expiry and status of a table
# that the test environment made beforehand and checks afterwards.
#   runtime_only.sh PYTHON TEST_PYTHON
set -euo pipefail
python=$1
test_python=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

PYTHONPATH=tests "$test_python" tests/support/install_check.py make "$work/warehouse"
.tools/bin/uv build --no-build-logs -o "$work/dist" .  # the wheel from the sdist: no stale build/
"$python" -m venv "$work/runtime"
"$work/runtime/bin/pip" install --quiet --disable-pip-version-check "$work"/dist/paimond-*.whl
echo "installed without extras:"
"$work/runtime/bin/pip" list --format=freeze --disable-pip-version-check | paste -sd ' '

paimond="$work/runtime/bin/paimond"
"$paimond" --help > /dev/null
for table in db.all_types_pk db.pk_partial_update; do
    "$paimond" compact "$work/warehouse" --table "$table" --full
    "$paimond" expire-snapshots "$work/warehouse" --table "$table" --retain-max 1 --retain-min 1
done
"$paimond" status "$work/warehouse"
PYTHONPATH=tests "$test_python" tests/support/install_check.py verify "$work/warehouse"
echo "runtime-only install: passed"
