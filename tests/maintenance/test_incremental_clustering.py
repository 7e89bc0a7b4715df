"""Incremental clustering of append tables (``clustering.incremental``): the pick against
Paimon's own ``IncrementalClusterStrategyTest`` cases (apache/paimon 5dacde516b), and the
``compact`` job on a pypaimon table: the picked files come back sorted by the clustering
columns at the output level, every snapshot reads the same rows (pypaimon, Java)."""

from __future__ import annotations

import datetime
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.java_reader import JavaReader, canonical_rows
from support.pypaimon_oracle import live_files, read_rows, snapshot_ids
from support.pypaimon_tables import TableWriter, catalog_for, not_null

from paimond.clock import Clock
from paimond.format.binary.sort_keys import zorder_key
from paimond.format.meta.manifest import EMPTY_STATS, DataFileMeta
from paimond.format.types.data_types import IntType
from paimond.lsm.levels import SortedRun
from paimond.maintenance.compact.cluster_plan import pick_cluster
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.table.catalog import open_table
from paimond.table.options.compaction import CompactionOptions
from paimond.table.storage.interface import open_storage

CLOCK = Clock(fixed_ms=int(datetime.datetime(2026, 11, 22, 12, 0).timestamp() * 1000))
NAME = "db.clustered"


def _file(size: int, level: int) -> DataFileMeta:
    return DataFileMeta(
        file_name=f"f{size}", file_size=size, row_count=1, min_key=b"", max_key=b"",
        key_stats=EMPTY_STATS, value_stats=EMPTY_STATS, min_sequence_number=0,
        max_sequence_number=0, schema_id=0, level=level, extra_files=(),
        creation_time_millis=0, delete_row_count=0, embedded_index=None, file_source=0,
        value_stats_cols=None, external_path=None, first_row_id=None, write_cols=None,
        write_cols_sequences=None)


# IncrementalClusterStrategyTest: strategy on keys f0,f1 (max size amp 25, ratio 1, trigger 3)
@pytest.mark.parametrize(("case", "num_levels", "runs", "same_keys", "level", "sizes"), [
    ("testPickFullCompactionWithEmptyRuns", 3, [], True, None, None),
    ("testPickFullCompactionWithSingleRunSameClusterKey", 3, [(1, 2)], True, None, None),
    ("testPickFullCompactionWithSingleRunDifferentClusterKey", 3, [(1, 2)], False, 2, [1]),
    ("testPickFullCompactionWithSingleRunNotAtMaxLevel", 3, [(1, 1)], True, 2, [1]),
    ("testPickFullCompactionWithMultipleRuns", 3, [(1, 0), (2, 1), (3, 2)], True, 2, [1, 2, 3]),
    ("testPickFullCompactionWithDifferentNumLevels", 5, [(1, 0), (2, 1)], True, 4, [1, 2]),
    ("testPickFullCompactionWithMixedSchemas", 3, [(1, 0), (2, 1), (3, 2)], True, 2, [1, 2, 3]),
])
def test_full_pick_as_java(case: str, num_levels: int, runs: list[tuple[int, int]],
                           same_keys: bool, level: int | None, sizes: list[int] | None) -> None:
    sorted_runs = [SortedRun(lv, (_file(size, lv),)) for size, lv in runs]
    options = CompactionOptions(num_sorted_run_trigger=3, max_size_amp_percent=25, size_ratio=1)
    unit = pick_cluster(sorted_runs, num_levels, options, full=True, same_keys=same_keys)
    if level is None:
        assert unit is None, case
    else:
        assert unit is not None and unit.output_level == level, case
        assert [f.file_size for f in unit.files] == sizes, case


SCHEMA = pa.schema([("dt", pa.string()), not_null("id", pa.int64()), ("a", pa.int32()),
                    ("b", pa.int32())])


def _build(warehouse: str) -> TableWriter:
    return TableWriter(catalog_for(warehouse), NAME, SCHEMA, partition_keys=("dt",),
                   options={"bucket": "-1", "file.format": "parquet",
                            "clustering.columns": "a,b", "clustering.incremental": "true",
                            "target-file-size": "4 kb"})


def _write(writer: TableWriter, commits: range) -> None:
    rng = random.Random(commits.start)
    for commit in commits:
        writer.commit([{"dt": "x", "id": commit * 1000 + i, "a": rng.randrange(1000),
                        "b": rng.randrange(1000)} for i in range(300)])


def _compact(warehouse: str, *, full: bool = False) -> Any:
    table = open_table(open_storage(warehouse), warehouse, NAME)
    job = JOBS["compact"]
    return job.run(table, job.settings(full=full), JobContext(clock=CLOCK)).result


def _in_key_order(warehouse: str, files: list[dict[str, Any]]) -> bool:
    files = sorted(files, key=lambda f: int(f["file_name"].rsplit("-", 1)[1].split(".")[0]))
    rows = pa.concat_tables(pq.ParquetFile(f["path"]).read() for f in files)
    keys = [zorder_key(r, [IntType(), IntType()]) for r in
            zip(rows.column("a").to_pylist(), rows.column("b").to_pylist(), strict=True)]
    return keys == sorted(keys)


def test_compact_clusters_the_picked_files(tmp_path: Path, java_reader: JavaReader) -> None:
    warehouse = str(tmp_path / "wh")
    writer = _build(warehouse)
    _write(writer, range(6))
    history = {i: read_rows(warehouse, NAME, i) for i in snapshot_ids(warehouse, NAME)}
    # every file a level-0 run, at least 5 (num-sorted-run.compaction-trigger): universal
    # compaction picks them all, to the max level (num-levels 6), clustered by z-order (auto)
    first = _compact(warehouse)
    assert first.snapshot is not None and first.snapshot.commit_kind == "COMPACT"
    assert first.plan.strategy == "zorder" and first.files_in >= 6
    files = live_files(warehouse, NAME, first.snapshot.id)
    assert {f["level"] for f in files} == {5} and _in_key_order(warehouse, files)
    for snapshot_id, expected in history.items():
        assert read_rows(warehouse, NAME, snapshot_id).equals(expected)
    # new level-0 files: the size ratio picks some of them, clustered to a middle level
    _write(writer, range(6, 9))
    expected = read_rows(warehouse, NAME)
    second = _compact(warehouse)
    assert second.snapshot is not None
    task = second.plan.tasks[0]
    assert all(e.file.level == 0 for e in task.inputs) and 0 < task.output_level < 5
    files = live_files(warehouse, NAME, second.snapshot.id)
    middle = [f for f in files if f["level"] == task.output_level]
    assert middle and _in_key_order(warehouse, middle)
    assert read_rows(warehouse, NAME).equals(expected)
    # --full: every run to the max level; then one max-level run by the same keys: nothing
    full = _compact(warehouse, full=True)
    files = live_files(warehouse, NAME, full.snapshot.id)
    assert {f["level"] for f in files} == {5} and _in_key_order(warehouse, files)
    assert read_rows(warehouse, NAME).equals(expected)
    java = java_reader.read_rows(Path(warehouse) / "db.db" / "clustered")
    assert Counter(java) == Counter(canonical_rows(expected))
    assert _compact(warehouse, full=True).snapshot is None
