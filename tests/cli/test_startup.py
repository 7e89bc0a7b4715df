"""What a command imports before it works (issue #22, goal 1): the import graph, never a time.

Each case runs the command in a fresh interpreter and lists the modules it loaded; the CPU
figures are bench/startup.py's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from paimond.cli.main import EXECUTORS, build_parser

# Daemon-only, Spark-only and pandas: none belongs in a one-shot command's start-up.
NEVER_AT_START = ("pandas", "apscheduler", "prometheus_client", "pyspark", "structlog")

PROBE = """
import json, sys
from paimond.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})), file=sys.stderr)
"""


def _top_level_modules(*argv: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                          timeout=120, check=False)
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["compact", "--help"]])
def test_help_and_version_import_no_job_code(argv: list[str]) -> None:
    loaded = _top_level_modules(*argv)
    assert not loaded & {*NEVER_AT_START, "pyarrow", "numpy", "fsspec", "fastavro"}


def test_status_of_a_warehouse_without_tables_imports_no_daemon_or_pandas(
        tmp_path: Path) -> None:
    loaded = _top_level_modules("status", str(tmp_path))
    assert "fsspec" in loaded  # it did open the warehouse
    assert not loaded & {*NEVER_AT_START, "pyarrow"}


def test_the_cli_offers_the_executors_spark_executor_knows() -> None:
    from paimond.spark.executor import EXECUTORS as KNOWN

    assert EXECUTORS == KNOWN
    compact = build_parser().parse_args(["compact", "wh", "--table", "d.t", "--executor", "spark"])
    assert compact.executor == "spark"
