#!/usr/bin/env bash
# The newest releases the dependency ranges allow, without the oracles (pypaimon pins
# pyarrow < 20): the tests that need no oracle (tests/conftest.py selects them).
#   newest_deps.sh PYTHON
set -euo pipefail
python=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

.tools/bin/uv venv --quiet --python "$python" "$work/venv"
.tools/bin/uv pip install --quiet --python "$work/venv/bin/python" --resolution highest \
    --compile-bytecode --group test-core .
"$work/venv/bin/python" -c "import importlib.metadata as m; print('newest:', ', '.join(
    f'{d} {m.version(d)}' for d in ('pyarrow', 'numpy', 'fsspec', 's3fs', 'fastavro', 'structlog',
                                    'pyroaring', 'zstandard', 'apscheduler', 'prometheus-client')))"
cd tests
PAIMOND_TESTS_WITHOUT_ORACLES=1 "$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
    --rootdir .. -c ../pyproject.toml .
