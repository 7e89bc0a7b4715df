"""limits.memory_budget_mb enforced: task estimates from the plan, admission within the
budget, smaller batches for a task that does not fit, and the peak RSS of a real compaction
(a child process per run) within a small budget that four tasks at once exceed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for, sort_rows

from paimond.clock import SYSTEM_CLOCK
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.memory import (
    MIN_BATCH_ROWS,
    MemoryBudget,
    TaskMemory,
    estimate_task_bytes,
    fit_batch_rows,
    reader_bytes,
)
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

NAME = "m.t"
BUCKETS, COMMITS, ROWS = 4, 6, 10_000  # rows per bucket per commit
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("pad", pa.string()),
                    ("v", pa.float64())])
BUDGET_MB = 120
PAD = 240  # bytes of random letters per row


def _write(warehouse: Path) -> None:
    catalog = catalog_for(str(warehouse))
    catalog.create_database("m", True)
    from pypaimon import Schema
    catalog.create_table(NAME, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": str(BUCKETS), "num-sorted-run.compaction-trigger": "50",
        "num-sorted-run.stop-trigger": "100"}), False)
    table = catalog.get_table(NAME)
    rng = np.random.default_rng(3)
    for _ in range(COMMITS):
        ids = np.unique(rng.integers(0, 2 * BUCKETS * ROWS, BUCKETS * ROWS))
        letters = rng.integers(97, 123, (len(ids), PAD), dtype=np.uint8)
        pad = pa.array(letters.view(f"S{PAD}").ravel()).cast(pa.string())  # incompressible-ish
        data = pa.table({"id": ids, "pad": pad, "v": rng.random(len(ids))}, schema=SCHEMA)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("budget") / "wh"
    _write(warehouse)
    return warehouse


@pytest.fixture
def warehouse(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "wh"
    shutil.copytree(pristine, copy)
    return copy


def _tasks(warehouse: Path) -> list:  # type: ignore[type-arg]
    table = open_table(open_storage(str(warehouse)), str(warehouse), NAME)
    return list(CompactJob(table, clock=SYSTEM_CLOCK, full=True).plan().tasks)


def test_the_estimate_follows_batch_size_and_runs(warehouse: Path) -> None:
    tasks = _tasks(warehouse)
    assert len(tasks) == BUCKETS
    task = tasks[0]
    assert estimate_task_bytes(task, 4096) < estimate_task_bytes(task, 32768)
    fewer = type(task)(**{**{f: getattr(task, f) for f in task.__dataclass_fields__},
                          "inputs": task.inputs[:2]})
    assert estimate_task_bytes(fewer, 32768) < estimate_task_bytes(task, 32768)


def test_a_task_too_big_for_the_budget_spills_runs_then_gets_smaller_batches(
        warehouse: Path) -> None:
    task = _tasks(warehouse)[0]
    full = estimate_task_bytes(task, 32768)
    assert fit_batch_rows(task, 32768, full) == TaskMemory(full, 32768)  # fits as it is
    spilling = fit_batch_rows(task, 32768, full - 1)  # first the runs' readers give way
    assert spilling.batch_rows == 32768 and spilling.reading_bytes is not None
    assert spilling.estimate_bytes <= full - 1
    assert spilling.reading_bytes < sum(reader_bytes(task))
    # not even the largest reader fits beside the batches: smaller batches
    tight = estimate_task_bytes(task, 32768, reading_bytes=max(reader_bytes(task))) - 1
    fitted = fit_batch_rows(task, 32768, tight)
    assert fitted.batch_rows < 32768 and fitted.estimate_bytes <= tight
    floor = fit_batch_rows(task, 32768, 1)  # nothing fits: the smallest batches, alone
    assert floor.batch_rows == MIN_BATCH_ROWS


def test_the_budget_admits_within_it_and_a_big_reservation_alone() -> None:
    budget = MemoryBudget(100)
    assert budget.try_reserve(60) and not budget.try_reserve(60)
    assert budget.try_reserve(40)
    budget.release(60)
    budget.release(40)
    assert budget.try_reserve(500)  # alone: granted past the budget
    assert not budget.try_reserve(1)
    granted = threading.Event()

    def waiter() -> None:
        budget.reserve(10)
        granted.set()

    thread = threading.Thread(target=waiter)
    thread.start()
    assert not granted.wait(0.05)
    budget.release(500)
    thread.join(5)
    assert granted.is_set() and budget.reserved_bytes == 10
    assert budget.peak_reserved_bytes == 500


_CHILD = """
import json, sys
from paimond.clock import SYSTEM_CLOCK
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.memory import MemoryBudget
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

def rss_mb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024

warehouse, budget_mb = sys.argv[1], int(sys.argv[2])
table = open_table(open_storage(warehouse), warehouse, "m.t")
budget = MemoryBudget.of_mb(budget_mb) if budget_mb else None
job = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False, parallelism=4,
                 memory=budget)
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # the peak (VmHWM) starts again from here
base = rss_mb("VmRSS:")
summary = job.run()
assert summary.snapshot is not None and not summary.failures, summary.describe()
print(json.dumps({"peak_mb": rss_mb("VmHWM:") - base, "rows": summary.rows_written}))
"""


def _compact_in_child(warehouse: Path, budget_mb: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(warehouse), str(budget_mb)],
                         capture_output=True, text=True, check=True, timeout=120)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_peak_rss_of_a_compaction_stays_within_a_small_budget(pristine: Path,
                                                              tmp_path: Path) -> None:
    runs = {}
    for budget_mb in (0, BUDGET_MB):
        copy = tmp_path / f"wh{budget_mb}"
        shutil.copytree(pristine, copy)
        runs[budget_mb] = _compact_in_child(copy, budget_mb)
        if budget_mb:
            expected = sort_rows(read_rows(str(pristine), NAME), ["id"])
            assert sort_rows(read_rows(str(copy), NAME), ["id"]) == expected
    # four bucket tasks at once go past the budget; admitted within it, they stay inside
    assert runs[0]["peak_mb"] > BUDGET_MB, runs
    assert runs[BUDGET_MB]["peak_mb"] <= BUDGET_MB, runs
    assert runs[0]["rows"] == runs[BUDGET_MB]["rows"]


def test_the_compact_command_holds_its_tasks_to_a_memory_budget(
        warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from paimond.cli.main import main

    before = sort_rows(read_rows(str(warehouse), NAME, include_level0=True), ["id"])
    argv = ["compact", str(warehouse), "--table", NAME, "--full", "--memory-budget", "8 mb"]
    assert main(argv) == 0
    table = open_table(open_storage(str(warehouse)), str(warehouse), NAME)
    assert table.snapshots.latest().commit_kind == "COMPACT"
    assert sort_rows(read_rows(str(warehouse), NAME), ["id"]) == before
    capsys.readouterr()
    assert main([*argv[:-1], "lots"]) == 2  # a usage error, naming the option
    assert "--memory-budget" in capsys.readouterr().err
