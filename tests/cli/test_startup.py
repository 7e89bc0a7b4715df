"""What a command imports before it works: the import graph, never a time.

Each case runs the command in a fresh interpreter and lists the modules it loaded; the CPU
figures are bench/startup.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from paimond.cli.common import EXECUTORS
from paimond.cli.main import build_parser

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
    done = subprocess.run([sys.executable, "-c", AS_COMMAND, "status", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert "paimond.table.storage.interface" in loaded  # it did open the warehouse
    assert not {name.split(".")[0] for name in loaded} & {*NEVER_AT_START, "pyarrow", "fsspec"}


def test_the_cli_offers_the_executors_spark_executor_knows() -> None:
    from paimond.spark.executor import EXECUTORS as KNOWN

    assert EXECUTORS == KNOWN
    compact = build_parser().parse_args(["compact", "wh", "--table", "d.t", "--executor", "spark"])
    assert compact.executor == "spark"


# What ``compact`` must not load: the other jobs' code (the registry imports a job's modules
# when it runs), status code, the daemon, Spark, pandas; without worker processes nor level-0
# lookups (a deduplicate table), the process pool and the lookup cache; nor, on a local
# warehouse, fsspec.
NOT_FOR_COMPACT = (
    "paimond.maintenance.expire.snapshots", "paimond.maintenance.expire.rounds",
    "paimond.maintenance.tags.job", "paimond.maintenance.compact.sort_compact",
    "paimond.maintenance.compact.cluster_plan", "paimond.maintenance.expire.orphans",
    "paimond.maintenance.regenerate.rewrite_index", "paimond.maintenance.regenerate.rebuild_dv",
    "paimond.maintenance.expire.partitions", "paimond.maintenance.expire.consumers",
    "paimond.maintenance.manifests", "paimond.table.status.report",
    "paimond.daemon", "paimond.spark",
    # the daemon's settings (the registry's settings types load only config.declare)
    "paimond.config.settings", "paimond.config.policy", "paimond.config.jobs",
    "paimond.config.reference",
    "concurrent.futures.process", "multiprocessing", "paimond.lsm.lookup.lookup_cache",
    "fsspec",  # a local warehouse is read and written through os
    # a Parquet table without file indexes: no index codecs, no other format's code
    "paimond.format.file_index", "paimond.table.options.file_index", "pyarrow.orc",
    "paimond.format.row_file.file",
)

FULL_PROBE = """
import gc, json, os, sys
from paimond.cli.main import main
code = main({argv})  # None: as the paimond command, arguments from sys.argv
print(json.dumps({{"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
                  "collecting": gc.isenabled(), "frozen": gc.get_freeze_count()}}), file=sys.stderr)
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
sys.exit(code)
"""
AS_COMMAND = FULL_PROBE.format(argv="")
AS_CALLER = FULL_PROBE.format(argv="sys.argv[1:]")


def test_compact_loads_only_compaction_code(tmp_path: Path) -> None:
    from support.pypaimon_tables import build_pk_deduplicate

    warehouse = str(tmp_path / "wh")
    spec = build_pk_deduplicate(warehouse)
    unset = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for extra in (["--dry-run"], ["--parallelism", "1"]):
        done = subprocess.run(
            [sys.executable, "-c", AS_COMMAND, "compact", warehouse, "--table", spec.name,
             "--full", *extra], capture_output=True, text=True, timeout=120, check=False,
            env=unset)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "level 5" in done.stdout or "snapshot" in done.stdout
        loaded = set(json.loads(done.stderr.strip().splitlines()[-1]))
        assert "paimond.maintenance.compact.job" in loaded  # it did run the job
        unexpected = {name for name in loaded for banned in NOT_FOR_COMPACT
                      if name == banned or name.startswith(banned + ".")}
        assert not unexpected, (extra, sorted(unexpected))
        assert not {name.split(".")[0] for name in loaded} & set(NEVER_AT_START)
        assert ("paimond.cli.report" in loaded) == (extra == ["--dry-run"])  # its refusals
        state = json.loads(done.stderr.strip().splitlines()[-2])
        # numpy was imported with one OpenBLAS thread: none spinning beside the work
        assert state["OPENBLAS_NUM_THREADS"] == "1"
        # the job's imports were made without the collector and frozen; it collects again
        assert state["collecting"] and state["frozen"] > 10_000, state


def test_a_caller_of_main_keeps_its_collector_as_it_was(tmp_path: Path) -> None:
    """``main(argv)`` in someone's process: nothing of theirs is frozen (the command freezes
    what its own imports made: test above)."""
    from support.pypaimon_tables import build_pk_deduplicate

    warehouse = str(tmp_path / "wh")
    spec = build_pk_deduplicate(warehouse)
    done = subprocess.run([sys.executable, "-c", AS_CALLER, "compact", warehouse, "--table",
                           spec.name, "--full"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "paimond.maintenance.compact.job" in json.loads(done.stderr.strip().splitlines()[-1])
    state = json.loads(done.stderr.strip().splitlines()[-2])
    assert state["collecting"] and state["frozen"] == 0, state
