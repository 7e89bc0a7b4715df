"""A heavy job held to the memory budget: a table of one bucket or partition whose rows, as
Arrow holds them, are more than 10x the budget, compacted (or rescaled, or its postpone rows
moved and compacted) in a child process (threads, one task at a time, so the whole job is in
the one process) whose peak RSS over its starting point (modules imported, plan made) is
measured (/proc VmHWM after clear_refs); the rows pypaimon reads afterwards are the rows
written as a model merges them (a key's last version, which partial-update also gives rows
without NULLs; every row of an append table). The wide tables' runs hold more in their file
readers (a page and a buffer per column) than in their batches: all of them read at once
would pass the budget several times over. The sort compaction's own test, which also runs
the job with a budget as large as its input: test_sort_memory.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for, set_options, sort_rows

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(),
                                 reason="needs Linux /proc")]
BUDGET_MB, SLACK_MB = 8, 64
# ~89 MB of rows in Arrow, in long rows: pypaimon, which writes the tables, works row by row
COMMITS, ROWS, PAD = 10, 12_000, 720
PK_SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("pad", pa.string()),
                       ("v", pa.float64())])
APPEND_SCHEMA = pa.schema([("k", pa.int64()), ("pad", pa.string()), ("v", pa.float64())])
WIDE_ROWS = 5_000  # x 240 columns of doubles: ~96 MB of rows in Arrow
WIDE_SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False),
                         *((f"c{i}", pa.float64()) for i in range(239))])


def _batch(rng: np.random.Generator, schema: pa.Schema, key_space: int) -> pa.Table:
    rows = WIDE_ROWS if schema is WIDE_SCHEMA else ROWS
    keyed = schema.field("k").nullable is False
    columns = {"k": rng.choice(key_space, rows, replace=False) if keyed
               else rng.integers(0, key_space, rows)}
    for field in schema:
        if field.name == "k":
            continue
        if field.type == pa.string():
            letters = rng.integers(97, 123, (rows, PAD), dtype=np.uint8)
            columns[field.name] = pa.array(letters.view(f"S{PAD}").ravel()).cast(pa.string())
        else:
            columns[field.name] = rng.random(rows)
    return pa.table(columns, schema=schema)


def _write(warehouse: Path, name: str, schema: pa.Schema, primary: list[str],
           options: dict[str, str]) -> tuple[int, pa.Table]:
    """Writes the table; answers the bytes its rows take in Arrow and the rows a reader sees
    after any merge (a key's last version, or every row of an append table)."""
    catalog = catalog_for(str(warehouse))
    catalog.create_database(name.split(".")[0], True)
    catalog.create_table(name, Schema.from_pyarrow_schema(
        schema, primary_keys=primary or None, options={"target-file-size": "4 mb", **options}),
        False)
    table = catalog.get_table(name)
    rng = np.random.default_rng(len(name))
    size, written = 0, []
    for _ in range(COMMITS):
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        batch = _batch(rng, schema, 4 * (WIDE_ROWS if schema is WIDE_SCHEMA else ROWS))
        size += batch.nbytes
        written.append(batch)
        write.write_arrow(batch)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
    rows = pa.concat_tables(written)
    if primary:  # a key once per commit: its last commit's row
        last = {key: index for index, key in enumerate(rows.column("k").to_pylist())}
        rows = rows.take(sorted(last.values()))
    return size, sort_rows(rows, ["k"] if primary else ["k", "v"])


# name -> (schema, primary keys, table options, the job, its settings); rescale's table is
# written in one bucket, then its option set to two
CASES: dict[str, tuple[pa.Schema, list[str], dict[str, str], str, dict[str, Any]]] = {
    "primary-key full compaction": (PK_SCHEMA, ["k"], {"bucket": "1"}, "compact", {"full": True}),
    "deletion-vector table's first compaction": (
        PK_SCHEMA, ["k"], {"bucket": "1", "deletion-vectors.enabled": "true"}, "compact", {}),
    "lookup changelog": (PK_SCHEMA, ["k"], {"bucket": "1", "changelog-producer": "lookup"},
                         "compact", {"full": True}),
    "append compaction": (APPEND_SCHEMA, [], {"bucket": "-1", "target-file-size": "256 mb",
                                              "compaction.min.file-num": "2"},
                          "compact", {"full": True}),
    "incremental clustering": (APPEND_SCHEMA, [], {"bucket": "-1", "clustering.columns": "k",
                                                   "clustering.incremental": "true"},
                               "compact", {"full": True}),
    "postpone compaction": (PK_SCHEMA, ["k"], {"bucket": "-2"}, "compact", {"full": True}),
    "rescale": (PK_SCHEMA, ["k"], {"bucket": "1"}, "rescale", {}),
    "wide primary-key full compaction": (WIDE_SCHEMA, ["k"], {"bucket": "1"}, "compact",
                                         {"full": True}),
    # every version kept and combined a group of columns at a time (no NULLs: the last wins)
    "wide partial-update full compaction": (
        WIDE_SCHEMA, ["k"], {"bucket": "1", "merge-engine": "partial-update"}, "compact",
        {"full": True}),
}

_CHILD = """
import json, sys
from paimond.clock import SYSTEM_CLOCK
from paimond.maintenance.compact.memory import MemoryBudget
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

def rss_mb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024

warehouse, name, budget_mb, job_name, settings = sys.argv[1:6]
table = open_table(open_storage(warehouse), warehouse, name)
job = JOBS[job_name]
context = JobContext(clock=SYSTEM_CLOCK, memory_budget=MemoryBudget.of_mb(int(budget_mb)))
values = json.loads(settings)
if job_name == "compact":
    values.update(use_processes=False, parallelism=1)
job.run(table, job.settings(**values, dry_run=True), context)  # reads and imports first
import pyarrow as pa, pyarrow.compute as pc, pyarrow.ipc, pyarrow.parquet
pc.sort_indices(pa.table({"a": [2, 1]}), sort_keys=[("a", "ascending")])
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")
base = rss_mb("VmRSS:")
report = job.run(table, job.settings(**values), context)
assert not report.failed, report.result.describe()
postpone = getattr(report.result, "postpone", None)
rows = postpone.rows_read if postpone is not None else report.read_rows  # rows moved first
print(json.dumps({"peak_mb": rss_mb("VmHWM:") - base, "rows": rows,
                  "snapshot": table.snapshots.latest().commit_kind}))
"""


def _run_job(warehouse: Path, name: str, budget_mb: int, job: str, settings: dict[str, Any]
             ) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", _CHILD, str(warehouse), name, str(budget_mb),
                          job, json.dumps(settings)], capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def _rows(warehouse: Path, name: str, keyed: bool) -> list[dict[str, Any]]:
    """The table's rows as pypaimon merges them, level 0 included (a deletion-vector table's
    batch read skips its level-0 files, which are all its rows before the first compaction)."""
    rows = read_rows(str(warehouse), name, include_level0=True)
    return sort_rows(rows, ["k"] if keyed else ["k", "v"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_compaction_of_ten_times_the_budget_stays_within_it(case: str,
                                                               tmp_path: Path) -> None:
    schema, primary, options, job, settings = CASES[case]
    name, warehouse = "m.t", tmp_path / "wh"
    input_bytes, expected = _write(warehouse, name, schema, primary, options)
    assert input_bytes >= 10 * BUDGET_MB * 2**20
    if job == "rescale":
        set_options(str(warehouse), name, {"bucket": "2"})
    run = _run_job(warehouse, name, BUDGET_MB, job, settings)
    rows = WIDE_ROWS if schema is WIDE_SCHEMA else ROWS
    assert run["rows"] == COMMITS * rows, run  # every input row went through the job
    assert run["snapshot"] == ("OVERWRITE" if job == "rescale" else "COMPACT"), run
    assert _rows(warehouse, name, bool(primary)) == expected
    assert run["peak_mb"] <= BUDGET_MB + SLACK_MB, (case, run)
