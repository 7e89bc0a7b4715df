"""Append-table compaction (no primary key): the pickers against Paimon's own Java test cases
(``AppendCompactCoordinatorTest``, ``BucketedAppendCompactManagerTest``, apache/paimon
5dacde516b), and the ``compact`` job on pypaimon-written append tables, read back by pypaimon,
the Java reader and pypaimon-rust, against a model of the coordinator's and the bucketed
manager's picks written here."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pypaimon.schema.data_types import AtomicType
from pypaimon.schema.schema_change import SchemaChange
from support import warm_python
from support.java_reader import JavaReader, canonical_rows, multiset_diff
from support.pypaimon_oracle import live_files, read_rows, read_rows_rust
from support.pypaimon_tables import (
    TableWriter,
    build_append_fixed_bucket,
    build_append_unaware,
    catalog_for,
    not_null,
)
from support.table_history import assert_exactly_referenced

from paimond.clock import Clock
from paimond.errors import UnsupportedError
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS
from paimond.format.meta.manifest import FILE_KIND_DELETE, ManifestEntry
from paimond.lsm.lookup.deletion_vectors import vector_of
from paimond.maintenance.compact.append_plan import (
    AppendCompactOptions,
    FileVector,
    PickFile,
    pick_compact_before,
    pick_full,
    pick_unaware,
)
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.indexes.deletion_vectors import write_deletion_vectors
from paimond.table.layout import partition_text
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

NOON = datetime.datetime(2026, 11, 22, 12, 0)
CLOCK = Clock(fixed_ms=int(NOON.timestamp() * 1000))
MB = 1 << 20


# ---- the coordinator (AppendCompactCoordinatorTest: min.file-num 3, DV enabled) -------------

TARGET = 256 * MB
COORDINATOR = AppendCompactOptions(target_file_size_bytes=TARGET,
                                   compaction_file_size_bytes=int(TARGET * 0.7), min_file_num=3)


def _files(count: int, size: int, rows: int = 100) -> list[PickFile]:
    return [PickFile(f"f{i}", size, 0, rows) for i in range(count)]


@pytest.mark.parametrize(("case", "count", "size", "tasks"), [
    ("testForCompactPlan", 200, 0, 2),
    ("testNoCompactTask", 100, 2**63 - 1, 0),
    ("testMinSizeCompactTask", 100, TARGET // 3 + 1, 17),
    ("testFilterMiddleFile", 100, TARGET // 10 * 8, 0),
    ("testCompactGroupSplit (first)", 1000, TARGET // 10, 56),
    ("testCompactGroupSplit (second)", 1050, TARGET // 5, 105),
    ("testCompactGroupSplit2", 1089, TARGET // 5, 109),
])
def test_coordinator_packs_as_java(case: str, count: int, size: int, tasks: int) -> None:
    files = _files(count, size)
    picked = pick_unaware(files, COORDINATOR, {})  # the Java test table has DV enabled
    assert len(picked) == tasks, case
    assert len(pick_unaware(files, COORDINATOR, None)) == tasks, case  # same without DV
    names = [f.name for group in picked for f in group]
    assert len(names) == len(set(names))
    assert all(len(group) > 1 for group in picked)


@pytest.mark.parametrize(("case", "count", "size", "cardinalities", "tasks"), [
    ("testDeleteRatio", 2, TARGET, {0: 21}, 1),
    ("testDeleteRatioNoCompact", 2, TARGET, {0: 11}, 0),
    ("testDeleteRatioMergeTask", 100, 1, dict.fromkeys(range(100), 21), 1),
])
def test_coordinator_delete_ratio_as_java(case: str, count: int, size: int,
                                          cardinalities: dict[int, int], tasks: int) -> None:
    files = _files(count, size)
    vectors = {files[i].name: FileVector(f"index-{i}", c) for i, c in cardinalities.items()}
    assert len(pick_unaware(files, COORDINATOR, vectors)) == tasks, case


def test_coordinator_keeps_one_index_files_data_together() -> None:
    """Files sharing a DV index file land in one task, which holds even a lone large file."""
    files = _files(6, TARGET)
    vectors = {"f0": FileVector("i0", 50), "f1": FileVector("i0", None), "f2": FileVector("i1", 1)}
    assert [sorted(f.name for f in g) for g in pick_unaware(files, COORDINATOR, vectors)] == [
        ["f0", "f1"]]


# ---- the bucketed manager (BucketedAppendCompactManagerTest: min 4, target 1024) ------------


def _seq(low: int, high: int) -> PickFile:
    return PickFile(f"{low}-{high}", high - low + 1, low)


PICKS = [  # (files, picked, still waiting), testPickEmptyAndNotRelease and ...AndRelease
    ([(1, 50)], None, [(1, 50)]),
    ([(1, 2048)], None, []),
    ([(1, 2048), (2049, 2100)], None, [(2049, 2100)]),
    ([(1, 2048), (2049, 2100), (2101, 2110)], None, [(2049, 2100), (2101, 2110)]),
    ([(1, 2048), (2049, 4096), (4097, 5000)], None, [(4097, 5000)]),
    ([(1, 1024), (1025, 2049), (2050, 2500), (2501, 4096), (4097, 6000), (6001, 7000),
      (7001, 7600)], None, [(6001, 7000), (7001, 7600)]),
    ([(1, 2048), (2049, 4096), (4097, 4100), (4101, 6150)], None, [(4101, 6150)]),
    ([(1, 2048), (2049, 4096), (4097, 5000), (5001, 6144), (6145, 7048)], None, [(6145, 7048)]),
    ([(1, 500), (501, 1000)], None, [(1, 500), (501, 1000)]),
    ([(1, 500), (501, 1000), (1001, 2048)], None, [(501, 1000), (1001, 2048)]),
    ([(1, 2050), (2051, 2100), (2101, 2110)], None, [(2051, 2100), (2101, 2110)]),
    # and picks: four files within twice the target, the rest waits
    ([(1, 10), (11, 20), (21, 30), (31, 40), (41, 50)], [(1, 10), (11, 20), (21, 30), (31, 40)],
     [(41, 50)]),
    ([(1, 2048), (2049, 2060), (2061, 2070), (2071, 2080), (2081, 2090)],
     [(2049, 2060), (2061, 2070), (2071, 2080), (2081, 2090)], []),
]


@pytest.mark.parametrize(("files", "picked", "waiting"), PICKS)
def test_bucketed_pick_as_java(files: list[tuple[int, int]], picked: list[tuple[int, int]] | None,
                               waiting: list[tuple[int, int]]) -> None:
    got, left = pick_compact_before([_seq(*f) for f in files], 4, 1024)
    assert got == (None if picked is None else tuple(_seq(*f) for f in picked))
    assert left == tuple(_seq(*f) for f in waiting)


BUCKET = AppendCompactOptions(target_file_size_bytes=1024, compaction_file_size_bytes=716,
                              min_file_num=4)


def _full_model(sizes: list[int], *, dv: set[int] | None = None, force: bool = False
                ) -> list[int] | None:
    """FullCompactTask as prose: nothing under three files (unless DV or forced); skip the
    leading large files without a vector; compact the rest if small ones outnumber large
    ones, always with DV."""
    if not force and (not sizes or (dv is None and len(sizes) < 3)):
        return None
    index = 0
    while not force and index < len(sizes) and sizes[index] >= 716 \
            and (dv is None or index not in dv):
        index += 1
    rest = list(range(index, len(sizes)))
    if dv is not None or force:
        return rest or None
    small = sum(1 for i in rest if sizes[i] < 716)
    return rest if small > len(rest) - small and len(rest) >= 3 else None


def test_bucketed_full_compaction_against_the_model() -> None:
    rng = random.Random(17)
    for _ in range(400):
        sizes = [rng.choice([10, 300, 715, 716, 2000]) for _ in range(rng.randrange(0, 7))]
        files = [PickFile(f"f{i}", s, i) for i, s in enumerate(sizes)]
        dv = {i for i in range(len(sizes)) if rng.random() < 0.3} if rng.random() < 0.3 else None
        force = rng.random() < 0.1
        options = dataclasses.replace(BUCKET, force_rewrite_all_files=force)
        with_vector = None if dv is None else frozenset(f"f{i}" for i in dv)
        got = pick_full(files, options, with_vector)
        expected = _full_model(sizes, dv=dv, force=force)
        assert (None if got is None else [int(f.name[1:]) for f in got]) == expected, (sizes, dv)


# ---- the job on pypaimon tables ---------------------------------------------------------------


def _open(warehouse: str, name: str) -> Table:
    return open_table(open_storage(warehouse), warehouse, name)


def _bucket_files(table: Table) -> dict[tuple[bytes, int], list[ManifestEntry]]:
    latest = table.snapshots.latest()
    assert latest is not None
    return {key: [f.entry for f in files.files]
            for key, files in scan_snapshot(table, latest).buckets().items()}


def _reads_of_every_snapshot(warehouse: str, table: Table) -> dict[int, pa.Table]:
    return {i: read_rows(warehouse, table.name, i) for i in table.snapshots.list_ids()}


def _split_rows(warehouse: str, name: str) -> dict[tuple[Any, int], list[dict[str, Any]]]:
    """pypaimon's rows per (partition, bucket), in its read order (no sorting)."""
    from support.pypaimon_oracle import pypaimon_table
    builder = pypaimon_table(warehouse, name, None).new_read_builder()
    out: dict[tuple[Any, int], list[dict[str, Any]]] = defaultdict(list)
    for split in builder.new_scan().plan().splits():
        rows = builder.new_read().to_arrow([split]).to_pylist()
        out[(tuple(split.partition.values), split.bucket)] += rows
    return dict(out)


def _per_bucket(java_rows: list[str], buckets: dict[tuple[Any, int], list[dict[str, Any]]]
                ) -> dict[tuple[Any, int], list[str]]:
    """Java's rows (in its read order) grouped by the bucket pypaimon read each id from."""
    where = {row["id"]: key for key, rows in buckets.items() for row in rows}
    out: dict[tuple[Any, int], list[str]] = defaultdict(list)
    for row in java_rows:
        out[where[json.loads(row)[1]]].append(row)
    return dict(out)


def _compact(table: Table, *, full: bool = False) -> Any:
    job = CompactJob(table, clock=CLOCK, full=full, use_processes=False)
    return job.run()


def _check_committed(table: Table, before: dict[tuple[bytes, int], list[ManifestEntry]],
                     summary: Any) -> None:
    """The COMPACT snapshot: inputs deleted, outputs level 0, file_source COMPACT, the
    current schema, statistics, sequence numbers counted from the first input."""
    snapshot = summary.snapshot
    assert snapshot is not None and snapshot.commit_kind == "COMPACT"
    after = _bucket_files(table)
    for result in summary.results:
        task = result.task
        key = (task.partition, task.bucket)
        live = {e.file.file_name for e in after[key]}
        assert not live & {e.file.file_name for e in result.deleted}
        assert {e.file.file_name for e in result.added} <= live
        assert sum(e.file.row_count for e in result.added) == sum(
            e.file.row_count for e in task.inputs) - result.rows_read + result.rows_written
        sequence = task.inputs[0].file.min_sequence_number
        for entry in result.added:
            meta = entry.file
            assert (meta.level, meta.file_source, meta.schema_id) == (0, 1, task.schema_id)
            assert (meta.min_sequence_number, meta.max_sequence_number) == (
                sequence, sequence + meta.row_count - 1)
            sequence += meta.row_count
            assert meta.value_stats.min_values and meta.value_stats.null_counts is not None
            assert entry.total_buckets == task.inputs[0].total_buckets
    assert set(after) == set(before)


def test_unaware_partitioned_parquet(tmp_path: Path, java_reader: JavaReader) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_append_unaware(warehouse)
    table = _open(warehouse, spec.name)
    history = _reads_of_every_snapshot(warehouse, table)
    before = _bucket_files(table)
    summary = _compact(table)
    _check_committed(table, before, summary)
    # the model: every file is tiny, so a partition's files are one task when there are at
    # least compaction.min.file-num (5) of them, and one output file each
    after = _bucket_files(table)
    for key, files in before.items():
        assert len(after[key]) == (1 if len(files) >= 5 else len(files)), key
    assert any(len(files) >= 5 for files in before.values())
    rows = read_rows(warehouse, spec.name)
    assert rows.equals(spec.expected_rows)
    for snapshot_id, expected in history.items():
        assert read_rows(warehouse, spec.name, snapshot_id).equals(expected)
    java = java_reader.read_rows(tmp_path / "wh" / "db.db" / "append_unaware")
    assert Counter(java) == Counter(canonical_rows(rows)), multiset_diff(java,
                                                                         canonical_rows(rows))
    rust = read_rows_rust(warehouse, spec.name)
    if rust is not None:
        assert rust.num_rows == rows.num_rows
    again = _compact(table)  # nothing small left in numbers worth compacting
    assert again.snapshot is None and not again.plan.tasks


def test_fixed_buckets_avro_keep_their_order(tmp_path: Path, java_reader: JavaReader) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_append_fixed_bucket(warehouse)
    table = _open(warehouse, spec.name)
    order = _split_rows(warehouse, spec.name)
    java_path = tmp_path / "wh" / "db.db" / "append_fixed_bucket"
    java_order = java_reader.read_rows(java_path)  # in read order: buckets, files, rows
    before = _bucket_files(table)
    summary = _compact(table)  # normal pick: min.file-num 5 consecutive files
    _check_committed(table, before, summary)
    after = _bucket_files(table)
    for key, files in before.items():
        assert len(after[key]) == (1 if len(files) >= 5 else len(files)), key
    assert {len(f) for f in before.values()} >= {4, 5}
    assert _split_rows(warehouse, spec.name) == order
    full = _compact(table, full=True)  # the 4-file buckets: small ones outnumber large ones
    _check_committed(table, after, full)
    assert all(len(files) == 1 for files in _bucket_files(table).values())
    assert _split_rows(warehouse, spec.name) == order
    assert all(e.file.file_name.endswith(".avro") for r in full.results for e in r.added)
    rows = read_rows(warehouse, spec.name)
    assert rows.equals(spec.expected_rows)
    java = java_reader.read_rows(java_path)
    assert Counter(java) == Counter(canonical_rows(rows))
    assert _per_bucket(java, order) == _per_bucket(java_order, order)


def test_orc_with_file_index_and_rolling_through_the_registry(tmp_path: Path) -> None:
    """ORC files with a bloom-filter index, a small target size so outputs roll, the job run
    as the CLI, daemon and Spark run it (``JOBS['compact']``)."""
    warehouse = str(tmp_path / "wh")
    schema = pa.schema([not_null("id", pa.int64()), ("s", pa.string())])
    writer = TableWriter(catalog_for(warehouse), "db.append_orc", schema, options={
        "bucket": "-1", "file.format": "orc", "file-index.bloom-filter.columns": "id",
        "target-file-size": "40kb", "compaction.min.file-num": "3"})
    rng, rows = random.Random(5), []
    for commit in range(8):
        batch = [{"id": commit * 10_000 + i, "s": f"{rng.random():.12f}" * 3}
                 for i in range(600)]
        writer.commit(batch)
        rows += batch
    table = _open(warehouse, "db.append_orc")
    before = _bucket_files(table)
    sizes = sorted(e.file.file_size for e in before[(next(iter(before))[0], 0)])
    report = JOBS["compact"].run(table, JOBS["compact"].settings(use_processes=False),
                                 JobContext(clock=CLOCK))
    summary = report.result
    _check_committed(table, before, summary)
    # the model: bins of the smallest files, each closed once past twice the target counting
    # the 4 MB open cost: every two files make one (4 MB each dwarfs 40 kb)
    assert [len(r.task.inputs) for r in summary.results] == [2] * (len(sizes) // 2)
    added = [e for r in summary.results for e in r.added]
    assert all(e.file.file_name.endswith(".orc") for e in added)
    assert all(any(n.endswith(".index") for n in e.file.extra_files)
               or e.file.embedded_index for e in added)
    assert len(added) > len(summary.results)  # rolled at the 40 kb target
    got = read_rows(warehouse, "db.append_orc")
    assert sorted(got.column("id").to_pylist()) == [r["id"] for r in rows]


def _add_vectors(table: Table, deleted: dict[tuple[bytes, int], dict[str, list[int]]]) -> None:
    added = []
    for (partition, bucket), files in deleted.items():
        vectors = {name: vector_of(np.array(p, dtype=np.int64), bitmap64=False)
                   for name, p in files.items()}
        entry, _ = write_deletion_vectors(table, vectors, partition, bucket, bitmap64=False)
        added.append(entry)
    Committer(table, commit_kind="APPEND", clock=CLOCK).commit(CommitChanges(index_added=added))


def test_fixed_bucket_deletion_vectors(tmp_path: Path, java_reader: JavaReader) -> None:
    """A fixed-bucket DV append table (vectors written by paimond's DV writer): the full
    compaction reads through the vectors, rewrites every file with one, and the bucket's
    index file loses their entries."""
    warehouse = str(tmp_path / "wh")
    schema = pa.schema([not_null("id", pa.int32()), ("v", pa.string())])
    writer = TableWriter(catalog_for(warehouse), "db.append_dv", schema, options={
        "bucket": "2", "bucket-key": "id", "deletion-vectors.enabled": "true"})
    rows = []
    for commit in range(4):
        batch = [{"id": commit * 100 + i, "v": f"v{i}"} for i in range(20)]
        writer.commit(batch)
        rows += batch
    table = _open(warehouse, "db.append_dv")
    before = _bucket_files(table)
    key = sorted(before)[0]
    victim = before[key][1].file.file_name
    _add_vectors(table, {key: {victim: [0, 2, 3]}})
    java_before = java_reader.read_rows(tmp_path / "wh" / "db.db" / "append_dv")
    assert len(java_before) == len(rows) - 3
    summary = _compact(table, full=True)
    deleted_inputs = {e.file.file_name for r in summary.results for e in r.deleted}
    assert victim in deleted_inputs
    latest = table.snapshots.latest()
    assert latest is not None
    index = [e for e in scan_snapshot(table, latest).index_entries
             if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS]
    assert all(not e.index_file.dv_ranges for e in index)
    java_after = java_reader.read_rows(tmp_path / "wh" / "db.db" / "append_dv")
    assert Counter(java_after) == Counter(java_before)
    got = read_rows(warehouse, "db.append_dv")
    assert got.num_rows == len(rows) - 3


def test_unaware_deletion_vectors(tmp_path: Path, java_reader: JavaReader) -> None:
    """A bucket-unaware DV table, vectors in three index files (written by paimond's DV
    writer). The coordinator's model: in partition a, A1 and A3 are past the delete ratio
    (6 and 7 of 20 rows deleted), in different index files, so they form one task; A2 (1 of
    20) and every file of b are large and kept. Afterwards A1's index file is replaced by
    one holding A2's vector alone, A3's index file is gone, b's is untouched."""
    warehouse = str(tmp_path / "wh")
    schema = pa.schema([("dt", pa.string()), not_null("id", pa.int32())])
    writer = TableWriter(catalog_for(warehouse), "db.unaware_dv", schema, partition_keys=("dt",),
                     options={"bucket": "-1", "deletion-vectors.enabled": "true",
                              "target-file-size": "2kb", "compaction.small-file-ratio": "0.01"})
    for commit in range(4):
        writer.commit([{"dt": dt, "id": commit * 100 + i} for dt in "ab" for i in range(20)])
    table = _open(warehouse, "db.unaware_dv")
    files = {partition_text(table.latest_schema(), key[0]): [e.file.file_name for e in entries]
             for key, entries in _bucket_files(table).items()}
    partition = {p: key[0] for key in _bucket_files(table)
                 for p in [partition_text(table.latest_schema(), key[0])]}
    a1, a2, a3, _ = files["dt=a"]
    b1 = files["dt=b"][0]
    layout: list[tuple[str, dict[str, list[int]]]] = [
        ("dt=a", {a1: list(range(6)), a2: [0]}), ("dt=a", {a3: list(range(1, 8))}),
        ("dt=b", {b1: [0]})]
    added = []
    for where, vectors in layout:
        entry, _ = write_deletion_vectors(
            table, {n: vector_of(np.array(p, dtype=np.int64), bitmap64=False)
                    for n, p in vectors.items()}, partition[where], 0, bitmap64=False)
        added.append(entry)
    Committer(table, commit_kind="APPEND", clock=CLOCK).commit(CommitChanges(index_added=added))
    path = tmp_path / "wh" / "db.db" / "unaware_dv"
    java_before = java_reader.read_rows(path)
    assert len(java_before) == 160 - 6 - 1 - 7 - 1
    pypaimon_before = read_rows(warehouse, "db.unaware_dv")
    assert pypaimon_before.num_rows == len(java_before)
    summary = _compact(table)
    assert [sorted(e.file.file_name for e in r.task.inputs) for r in summary.results] == [
        sorted([a1, a3])]
    latest = table.snapshots.latest()
    assert latest is not None
    index = {e.index_file.file_name: e for e in scan_snapshot(table, latest).index_entries}
    assert added[0].index_file.file_name not in index and added[1].index_file.file_name \
        not in index
    assert added[2].index_file.file_name in index
    assert sorted(sorted(r.data_file_name for r in e.index_file.dv_ranges or ())
                  for e in index.values()) == sorted([[a2], [b1]])
    java_after = java_reader.read_rows(path)
    assert Counter(java_after) == Counter(java_before), multiset_diff(java_after, java_before)
    assert read_rows(warehouse, "db.unaware_dv").equals(pypaimon_before)
    for snapshot_id in table.snapshots.list_ids():
        read_rows(warehouse, "db.unaware_dv", snapshot_id)  # every snapshot still reads
    # expiring every older snapshot deletes the replaced index files and inputs, nothing else
    expire = JOBS["expire"]
    expire.run(table, expire.settings(retain_min=1, retain_max=1, older_than_ms=0),
               JobContext(clock=CLOCK))
    assert table.snapshots.list_ids() == [latest.id]
    assert_exactly_referenced(table)
    assert Counter(java_reader.read_rows(path)) == Counter(java_before)


def test_evolved_schema_and_file_num_limit(tmp_path: Path, java_reader: JavaReader) -> None:
    """Files of an older schema (a column added since) are rewritten in the current schema,
    the old rows reading null there. ``compaction.file-num-limit=7`` makes the coordinator
    scan 7 of the 12 small files (manifest order): one task of those 7, the other 5 stay."""
    warehouse = str(tmp_path / "wh")
    schema = pa.schema([not_null("id", pa.int32())])
    writer = TableWriter(catalog_for(warehouse), "db.evolved", schema,
                     options={"bucket": "-1", "compaction.file-num-limit": "7"})
    for commit in range(6):
        writer.commit([{"id": commit * 10 + i} for i in range(3)])
    catalog_for(warehouse).alter_table(
        "db.evolved", [SchemaChange.add_column("note", AtomicType("STRING"))], False)
    evolved = TableWriter.__new__(TableWriter)
    evolved.table = catalog_for(warehouse).get_table("db.evolved")
    evolved.write_schema = pa.schema([not_null("id", pa.int32()), ("note", pa.string())])
    evolved.commits = 0
    for commit in range(6, 12):
        evolved.commit([{"id": commit * 10 + i, "note": f"n{commit}"} for i in range(3)])
    table = _open(warehouse, "db.evolved")
    (before_files,) = _bucket_files(table).values()
    assert len(before_files) == 12 and table.latest_schema().id == 1
    rows = read_rows(warehouse, "db.evolved")
    path = tmp_path / "wh" / "db.db" / "evolved"
    java = java_reader.read_rows(path)
    summary = _compact(table)
    assert summary.plan is not None and any("file-num-limit" in r for r in summary.plan.skipped)
    assert [[e.file.file_name for e in r.task.inputs] for r in summary.results] == [
        sorted((e.file.file_name for e in before_files[:7]),
               key=lambda n: next(e.file.file_size for e in before_files
                                  if e.file.file_name == n))]
    (after,) = _bucket_files(table).values()
    assert len(after) == 6
    assert all(e.file.schema_id == 1 for r in summary.results for e in r.added)
    assert read_rows(warehouse, "db.evolved").equals(rows)
    assert rows.column("note").null_count == 18
    assert Counter(java_reader.read_rows(path)) == Counter(java)


@pytest.mark.parametrize("bucket", ["-1", "2"])
def test_a_vector_added_meanwhile_makes_the_commit_replan(tmp_path: Path, bucket: str) -> None:
    """A concurrent delete gives an input file its first vector after the plan: the commit
    conflicts (the rewrite would bring the rows back), the job re-plans, and the second
    attempt reads through the vector."""
    warehouse = str(tmp_path / "wh")
    schema = pa.schema([not_null("id", pa.int32())])
    writer = TableWriter(catalog_for(warehouse), "db.meanwhile", schema, options={
        "bucket": bucket, "deletion-vectors.enabled": "true",
        **({"bucket-key": "id"} if bucket != "-1" else {})})
    for commit in range(6):
        writer.commit([{"id": commit * 100 + i} for i in range(10)])
    table = _open(warehouse, "db.meanwhile")
    victims: list[str] = []

    def delete_meanwhile(done: int, total: int, task: Any) -> None:
        if victims:
            return
        victim = task.inputs[0]
        victims.append(victim.file.file_name)
        vectors = {victim.file.file_name: vector_of(np.array([0, 1], dtype=np.int64),
                                                    bitmap64=False)}
        entry, _ = write_deletion_vectors(table, vectors, victim.partition, victim.bucket,
                                          bitmap64=False)
        Committer(table, commit_kind="APPEND", clock=CLOCK,
                  check_conflicts=False).commit(CommitChanges(index_added=[entry]))

    expected = read_rows(warehouse, "db.meanwhile").num_rows - 2
    summary = CompactJob(table, clock=CLOCK, full=True, use_processes=False,
                         progress=delete_meanwhile).run()
    assert summary.attempts == 2 and summary.snapshot is not None
    assert victims[0] in {e.file.file_name for r in summary.results for e in r.deleted}
    assert read_rows(warehouse, "db.meanwhile").num_rows == expected


def test_refusals(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    schema = pa.schema([not_null("id", pa.int32())])
    for name, options, reason in [
        ("clustered", {"bucket": "-1", "clustering.columns": "id",
                       "clustering.incremental": "true"}, "clustering.incremental"),
    ]:
        writer = TableWriter(catalog_for(warehouse), f"db.{name}", schema, options=options)
        writer.commit([{"id": 1}])
        table = _open(warehouse, f"db.{name}")
        with pytest.raises(UnsupportedError, match=reason):  # the job clusters such a table
            _compact(table)
        assert table.snapshots.latest().id == 1  # nothing committed


@pytest.mark.parametrize("point", ["data_files.file_written", "data_files.file_written:6",
                                   "commit.manifest_list_written"])
def test_a_killed_run_leaves_the_table_readable_and_the_rerun_cleans(tmp_path: Path,
                                                                     point: str) -> None:
    """Killed (as by SIGKILL) at a crash point, the table reads as before; the rerun
    deletes what the killed run wrote, compacts, and leaves exactly the referenced files."""
    warehouse = str(tmp_path / "wh")
    spec = build_append_unaware(warehouse)
    code = ("import sys; from paimond.cli.main import main; "
            f"sys.exit(main(['compact', {warehouse!r}, '--table', {spec.name!r}, "
            "'--parallelism', '1']))")
    env = {**os.environ, "PAIMOND_CRASH_AT": point}
    killed = warm_python.run(["-c", code], env)  # a process of its own, forked warm
    assert killed.returncode == 137, killed.stderr[-2000:]
    table = _open(warehouse, spec.name)
    assert table.snapshots.latest_id() == spec.snapshot_count
    assert read_rows(warehouse, spec.name).equals(spec.expected_rows)
    summary = _compact(table)
    assert summary.snapshot is not None
    assert read_rows(warehouse, spec.name).equals(spec.expected_rows)
    assert_exactly_referenced(table)


def test_output_statistics_match_the_rows(tmp_path: Path) -> None:
    """pypaimon decodes each new file's value statistics; they equal the file's own rows'
    min, max and null count (read with pyarrow)."""
    warehouse = str(tmp_path / "wh")
    spec = build_append_unaware(warehouse)
    table = _open(warehouse, spec.name)
    summary = _compact(table)
    assert summary.snapshot is not None
    added = {e.file.file_name for r in summary.results for e in r.added}
    files = [f for f in live_files(warehouse, spec.name, summary.snapshot.id)
             if f["file_name"] in added]
    assert len(files) == len(added)
    from pypaimon.table.row.generic_row import GenericRowDeserializer
    from support.pypaimon_oracle import pypaimon_table
    all_fields = pypaimon_table(warehouse, spec.name, None).table_schema.fields
    for file in files:
        ids = pq.ParquetFile(file["path"]).read(columns=["id", "msg"])
        stats = file["value_stats"]
        names = file["value_stats_cols"] or [f.name for f in all_fields]
        fields = [f for f in all_fields if f.name in names]
        low = GenericRowDeserializer.from_bytes(stats["min_values"], fields).values
        high = GenericRowDeserializer.from_bytes(stats["max_values"], fields).values
        column = names.index("id")
        assert low[column] == pc.min(ids.column("id")).as_py()
        assert high[column] == pc.max(ids.column("id")).as_py()
        assert stats["null_counts"][names.index("msg")] == ids.column("msg").null_count
        assert file["file_source"] == 1 and file["level"] == 0


def test_partition_filter(tmp_path: Path) -> None:
    """``partitions=`` compacts only the matching ones."""
    warehouse = str(tmp_path / "wh")
    spec = build_append_unaware(warehouse)
    table = _open(warehouse, spec.name)
    job = CompactJob(table, clock=CLOCK, use_processes=False,
                     partitions={"dt": "2024-01-01"})
    plan = job.plan()
    assert plan.tasks and all(t.partition_text.startswith("dt=2024-01-01")
                              for t in plan.tasks)
    schema = table.latest_schema()
    assert {partition_text(schema, t.partition) for t in plan.tasks} == {
        t.partition_text for t in plan.tasks}
    summary = job.run()
    assert summary.snapshot is not None
    assert read_rows(warehouse, spec.name).equals(spec.expected_rows)
    assert all(e.kind != FILE_KIND_DELETE for e in _bucket_files(table)[
        (plan.tasks[0].partition, 0)])
