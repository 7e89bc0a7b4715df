"""The local pool's order and its processes: bucket tasks start largest
first and their results come back in plan order; a pool worker process and the ``paimond
compact`` process never import pandas (pyarrow would, 0.9 s of CPU each), while a caller's
own process is left alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for, sort_rows

from paimond.clock import SYSTEM_CLOCK
from paimond.lsm.task import CompactTask
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.execution import largest_first
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

NAME = "p.t"
BUCKETS = 4
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def _write(warehouse: Path) -> None:
    """Buckets of very different sizes: most keys' rows carry long values, some short."""
    from pypaimon import Schema

    catalog = catalog_for(str(warehouse))
    catalog.create_database("p", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": str(BUCKETS)}), False)
    table = catalog.get_table(NAME)
    rng = np.random.default_rng(5)
    for commit_number in range(3):
        ids = np.arange(2_000) + commit_number * 500
        widths = 1 + (ids % 7) ** 3  # the bucket a key hashes to decides nothing; sizes vary
        values = ["".join(chr(97 + c) for c in rng.integers(0, 26, w)) for w in widths]
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.table({"id": ids, "v": values}, schema=SCHEMA))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def test_tasks_start_largest_first_and_results_keep_plan_order(tmp_path: Path) -> None:
    _write(tmp_path)
    expected = sort_rows(read_rows(str(tmp_path), NAME), ["id"])
    table = open_table(open_storage(str(tmp_path)), str(tmp_path), NAME)
    started: list[tuple[bytes, int]] = []

    def progress(done: int, total: int, task: CompactTask) -> None:
        started.append((task.partition, task.bucket))  # one worker: finished = started order

    job = CompactJob(table, clock=SYSTEM_CLOCK, full=True, parallelism=1, use_processes=False,
                     progress=progress)
    planned = job.plan().tasks
    sizes = [task.input_bytes for task in planned]
    assert len(planned) == BUCKETS and len(set(sizes)) == BUCKETS
    assert sizes != sorted(sizes, reverse=True)  # the plan's order is not already the answer
    summary = job.run()
    by_size = sorted(planned, key=lambda t: t.input_bytes, reverse=True)
    assert started == [(t.partition, t.bucket) for t in by_size]
    assert [(r.task.partition, r.task.bucket) for r in summary.results] == \
        [(t.partition, t.bucket) for t in planned]
    assert sort_rows(read_rows(str(tmp_path), NAME), ["id"]) == expected


def test_largest_first_keeps_the_plan_order_among_equals() -> None:
    class Task:
        def __init__(self, name: str, input_bytes: int) -> None:
            self.name, self.input_bytes = name, input_bytes

    tasks = [Task("a", 5), Task("b", 9), Task("c", 5), Task("d", 1), Task("e", 9)]
    ordered = largest_first(tasks)  # type: ignore[arg-type]
    assert [t.name for t in ordered] == ["b", "e", "a", "c", "d"]  # type: ignore[attr-defined]


_POOL_SCRIPT = """
import sys
import numpy as np
import pyarrow as pa
from paimond.maintenance.execution import run_in_local_pool

def probe(task):
    pa.array(np.arange(3)).to_numpy()
    pa.array(["a", None])
    return "pandas" in sys.modules

results, failures = run_in_local_pool([0, 1, 2], probe, 2, use_processes=True, progress=None)
assert not failures, failures
pa.array(np.arange(3)).to_numpy()  # the caller's own process: pyarrow imports pandas as ever
print(sorted(results), "pandas" in sys.modules)
"""


def test_pool_workers_skip_pandas_and_the_caller_keeps_it() -> None:
    out = subprocess.run([sys.executable, "-c", _POOL_SCRIPT], check=True, capture_output=True,
                         text=True).stdout.split()
    assert out == ["[False,", "False,", "False]", "True"]


def test_the_compact_command_runs_without_pandas(tmp_path: Path) -> None:
    _write(tmp_path)
    expected = sort_rows(read_rows(str(tmp_path), NAME), ["id"])
    probe = textwrap.dedent("""
        import atexit, sys
        atexit.register(lambda: print("PANDAS", "pandas" in sys.modules))
        from paimond.cli.main import main
        sys.argv[1:] = ["compact", sys.argv[1], "--table", "p.t", "--full",
                        "--parallelism", "1"]
        sys.exit(main())
    """)
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], check=True,
                         capture_output=True, text=True).stdout
    assert "buckets compacted 4, failed 0" in out and "PANDAS False" in out, out
    assert sort_rows(read_rows(str(tmp_path), NAME), ["id"]) == expected
