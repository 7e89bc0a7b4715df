#!/usr/bin/env bash
# The Spark 3.5 environment of bench/compact_anchors.py's Paimon Spark anchor: Maven Central
# serves Paimon's Spark connector only as paimon-spark-3.5 0.9.0 (Scala 2.12), which the
# project venv's pyspark 4.x cannot load. Built once in .bench-spark35/ (rebuild: delete it);
# prints the venv's Python. Uses uv when there is one, else venv + pip.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.bench-spark35
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import pyspark" 2>/dev/null; then
    python=${PYTHON:-$(readlink -f .venv/bin/python)}
    if command -v uv >/dev/null; then
        uv venv --quiet --python "$python" "$venv"
        uv pip install --quiet --python "$venv/bin/python" "pyspark==3.5.*"
    else
        "$python" -m venv "$venv"
        "$venv/bin/pip" install --quiet "pyspark==3.5.*"
    fi
fi
echo "$(pwd)/$venv/bin/python"
