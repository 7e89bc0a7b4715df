#!/usr/bin/env bash
# A benchmark on the newest dependency versions the ranges allow (what a plain `pip install
# paimond` resolves), beside the lock's: the venv is built once in .bench-newest/ (rebuild:
# delete it) and the script runs with its Python; the lock's run is `.venv/bin/python SCRIPT`.
# pypaimon pins pyarrow < 20, so tables are generated on the lock first, e.g.:
#   .venv/bin/python bench/compact_process.py --rows 2000000 10000000 --keep /tmp/bench
#   bench/newest_stack.sh bench/compact_process.py --rows 2000000 10000000 --keep /tmp/bench
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.bench-newest
if [ ! -x "$venv/bin/python" ]; then
    .tools/bin/uv venv --quiet --python "${PYTHON:-python3}" "$venv"
    .tools/bin/uv pip install --quiet --python "$venv/bin/python" --resolution highest \
        --group test-core -e . polars
fi
"$venv/bin/python" -c "import importlib.metadata as m; print('newest:', ', '.join(
    f'{d} {m.version(d)}' for d in ('pyarrow', 'numpy', 'fsspec', 's3fs')))"
exec "$venv/bin/python" "$@"
