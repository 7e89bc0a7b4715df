"""A sort compaction held to its memory budget: one partition of about 10x the budget, sorted
in a child process whose peak RSS over its starting point (modules imported, plan made) is
measured (/proc VmHWM after clear_refs). With the budget the sort spills its runs and stays
within budget + 64 MB; the same job with a budget as large as the partition holds all of it,
which shows the input really is that big. Both commit the same rows."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for, sort_rows

NAME = "m.sorted"
SCHEMA = pa.schema([("k", pa.int64()), ("pad", pa.string()), ("v", pa.float64())])
COMMITS, ROWS, PAD = 8, 40_000, 200  # ~70 MB of rows in Arrow, one partition
BUDGET_MB = 8
SLACK_MB = 64


def _write(warehouse: Path) -> None:
    catalog = catalog_for(str(warehouse))
    catalog.create_database("m", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(SCHEMA, options={
        "bucket": "-1", "target-file-size": "4 mb"}), False)
    table = catalog.get_table(NAME)
    rng = np.random.default_rng(11)
    for _ in range(COMMITS):
        letters = rng.integers(97, 123, (ROWS, PAD), dtype=np.uint8)
        data = pa.table({"k": rng.integers(0, 10**9, ROWS),
                         "pad": pa.array(letters.view(f"S{PAD}").ravel()).cast(pa.string()),
                         "v": rng.random(ROWS)}, schema=SCHEMA)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


_CHILD = """
import json, sys
from paimond.clock import SYSTEM_CLOCK
from paimond.maintenance.compact.sort_compact import SortCompactJob
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

def rss_mb(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1024

warehouse, budget_mb = sys.argv[1], int(sys.argv[2])
table = open_table(open_storage(warehouse), warehouse, "m.sorted")
job = SortCompactJob(table, "order", ("k",), clock=SYSTEM_CLOCK,
                     memory_budget_bytes=budget_mb * 1024 * 1024)
job.plan()  # the metadata reads, and the modules a sort imports, before the peak is reset
import pyarrow as pa, pyarrow.compute as pc, pyarrow.ipc, pyarrow.parquet
import paimond.maintenance.compact.external_sort, paimond.table.data_files.arrow_io
pc.sort_indices(pa.table({"a": [2, 1]}), sort_keys=[("a", "ascending")])
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")
base = rss_mb("VmRSS:")
summary = job.run()
assert summary.snapshot is not None
print(json.dumps({"peak_mb": rss_mb("VmHWM:") - base,
                  "rows": sum(r.rows for r in summary.results)}))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
def test_a_sort_of_ten_times_the_budget_stays_within_it(tmp_path: Path) -> None:
    pristine = tmp_path / "pristine"
    _write(pristine)
    expected = sort_rows(read_rows(str(pristine), NAME), ["k", "v"])
    runs = {}
    for budget_mb in (BUDGET_MB, 1024):
        copy = tmp_path / f"wh{budget_mb}"
        shutil.copytree(pristine, copy)
        out = subprocess.run([sys.executable, "-c", _CHILD, str(copy), str(budget_mb)],
                             capture_output=True, text=True, check=True, timeout=300)
        runs[budget_mb] = json.loads(out.stdout.strip().splitlines()[-1])
        assert sort_rows(read_rows(str(copy), NAME), ["k", "v"]) == expected
    assert runs[BUDGET_MB]["rows"] == runs[1024]["rows"] == COMMITS * ROWS
    assert runs[1024]["peak_mb"] > 10 * BUDGET_MB, runs  # the partition is 10x the budget
    assert runs[BUDGET_MB]["peak_mb"] <= BUDGET_MB + SLACK_MB, runs
