"""Deletion-vector maintenance in `compact` (and first-row lookups), checked through pypaimon.

Each scenario writes a deletion-vector table with pypaimon, then alternates pypaimon commits
with paimond compactions. pypaimon's batch read of such a table skips level 0 and reads
every other file through its deletion vector without merging, so after each compaction
(which pushes every level-0 file up) that read must equal an independent model of the merge
engine. A copy of the table with its index manifest dropped proves pypaimon applied
paimond's vectors: it reads back exactly the rows they delete, in addition."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from support.dv_scenarios import CLOCK, NOW, SCENARIOS, Live, Scenario
from support.pypaimon_oracle import read_rows, read_rows_rust
from support.pypaimon_tables import TableWriter, catalog_for, not_null, sort_rows

from paimond.cli.main import main
from paimond.errors import CommitConflictError
from paimond.format.meta.index_manifest import INDEX_TYPE_DELETION_VECTORS
from paimond.lsm.lookup.deletion_vectors import deleted_positions, filter_deleted
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.execution import LookupCacheSettings
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import CommitChanges, Committer
from paimond.table.data_files.arrow_io import read_data_file
from paimond.table.indexes.deletion_vectors import read_deletion_vectors
from paimond.table.scan.snapshot_scan import data_file_path, scan_snapshot
from paimond.table.storage.interface import open_storage


def _vector_count(table: Table) -> int:
    latest = table.snapshots.latest()
    assert latest is not None
    return sum(r.cardinality or 0 for e in scan_snapshot(table, latest).index_entries
               if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS
               for r in e.index_file.dv_ranges or ())


def _without_vectors(live: Live, target: Path) -> pa.Table:
    """pypaimon's read of a copy whose latest snapshot lists no index manifest."""
    shutil.copytree(live.warehouse, target)
    table = open_table(open_storage(str(target)), str(target), live.name)
    latest_id = table.snapshots.latest_id()
    path = Path(table.snapshots.path(latest_id))
    snapshot = json.loads(path.read_text())
    snapshot["indexManifest"] = None
    path.write_text(json.dumps(snapshot))
    return read_rows(str(target), live.name)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_pypaimon_reads_what_the_model_holds_after_every_compaction(
        scenario: Scenario, tmp_path: Path) -> None:
    live = Live(scenario, str(tmp_path / "wh"))
    snapshot_reads: dict[int, pa.Table] = {}
    superseded = 0
    for round_no in range(7):
        live.write(30 if round_no else 50)
        summaries = live.compact(full=round_no == 4)
        superseded += sum(r.rows_superseded for s in summaries for r in s.results)
        rows = read_rows(live.warehouse, live.name)
        assert rows.equals(live.expected()), f"{scenario.name} round {round_no}"
        latest = live.table.snapshots.latest_id()
        assert latest is not None
        snapshot_reads[latest] = rows
    if scenario.options.get("deletion-vectors.enabled") == "true":
        assert superseded > 0, "no compaction looked up and superseded an older row"
    # pypaimon-rust, a second independent reader, applies the vectors the same way.
    rust = read_rows_rust(live.warehouse, live.name)
    if rust is not None:
        assert rust.equals(live.expected())
    # Every earlier compacted snapshot still reads as it did.
    for snapshot_id, rows in snapshot_reads.items():
        assert read_rows(live.warehouse, live.name, snapshot_id=snapshot_id).equals(rows)


def test_pypaimon_applies_the_vectors_paimond_writes(tmp_path: Path) -> None:
    live = Live(SCENARIOS[0], str(tmp_path / "wh"))
    live.write(60)
    live.compact(full=True)
    live.write(40)
    summaries = live.compact()
    assert sum(r.rows_superseded for s in summaries for r in s.results) > 0
    deleted = _vector_count(live.table)
    assert deleted > 0
    with_vectors = read_rows(live.warehouse, live.name)
    assert with_vectors.equals(live.expected())
    raw = _without_vectors(live, tmp_path / "raw")
    assert raw.num_rows == with_vectors.num_rows + deleted
    assert not raw.equals(with_vectors)


def test_vectors_belong_to_live_files_above_level_0_until_a_full_compaction(tmp_path: Path) -> None:
    live = Live(SCENARIOS[0], str(tmp_path / "wh"))
    live.write(60)
    live.compact(full=True)
    for _ in range(3):
        live.write(25)
        live.compact()
    latest = live.table.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(live.table, latest)
    live_names = {f.meta.file_name for f in files.files}
    entries = [e for e in files.index_entries
               if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS]
    assert entries, "deletion vectors were expected after updates over a compacted table"
    for entry in entries:
        vectors = read_deletion_vectors(live.table, entry)
        for name, vector in vectors.items():
            assert name in live_names, f"vector of a file that is no longer live: {name}"
            meta = next(f.meta for f in files.files if f.meta.file_name == name)
            assert meta.level > 0, "a level-0 file never carries a deletion vector"
            assert vector and max(vector) < meta.row_count
    # A full compaction rewrites every file with a vector: none are left.
    live.compact(full=True)
    assert _vector_count(live.table) == 0
    assert read_rows(live.warehouse, live.name).equals(live.expected())


def test_bitmap64_vectors_are_written_in_the_64_bit_layout(tmp_path: Path) -> None:
    scenario = SCENARIOS[0]
    scenario = Scenario("dedup64", scenario.schema, scenario.keys, scenario.partition_keys,
                        scenario.options | {"deletion-vectors.bitmap64": "true"},
                        scenario.make, retract=True)
    live = Live(scenario, str(tmp_path / "wh"))
    live.write(60)
    live.compact(full=True)
    live.write(40)
    live.compact()
    latest = live.table.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(live.table, latest)
    entries = [e for e in files.index_entries
               if e.index_file.index_type == INDEX_TYPE_DELETION_VECTORS]
    assert entries
    for entry in entries:
        data = live.table.storage.read_bytes(live.table.file_path("index",
                                                                  entry.index_file.file_name))
        for dv_range in entry.index_file.dv_ranges or ():
            # 64-bit records: magic 1681511377 little-endian, meta length = L + 8
            magic = data[dv_range.offset + 4:dv_range.offset + 8]
            assert magic == (1681511377).to_bytes(4, "little")
            length = int.from_bytes(data[dv_range.offset:dv_range.offset + 4], "big")
            assert dv_range.length == length + 8
    # paimond's own DV-applied read of levels >= 1 equals the model, and so does
    # pypaimon-rust's (it reads the 64-bit layout; pypaimon 2.1.0 does not).
    assert _paimond_dv_read(live).equals(live.expected())
    rust = read_rows_rust(live.warehouse, live.name)
    if rust is not None:
        assert rust.equals(live.expected())


def _paimond_dv_read(live: Live) -> pa.Table:
    """Levels >= 1 read through their vectors, as a non-merging batch reader does."""
    table = live.table
    latest = table.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(table, latest)
    schema = table.latest_schema()
    vectors: dict[str, Any] = {}
    for entry in files.index_entries:
        vectors.update(read_deletion_vectors(table, entry))
    parts = []
    for live_file in files.files:
        if live_file.meta.level == 0:
            continue
        path = data_file_path(table, schema, live_file)
        batches = read_data_file(table.storage, path, file_format=path.rsplit(".", 1)[-1],
                                 file_schema=table.schema(live_file.meta.schema_id),
                                 read_schema=schema, key_value=False)
        parts += list(filter_deleted(batches, deleted_positions(
            vectors.get(live_file.meta.file_name))))
    rows = pa.Table.from_batches(parts).select(live.writer.read_schema.names)
    return sort_rows(rows.cast(live.writer.read_schema), live.scenario.keys)


def test_a_commit_computed_from_a_replaced_vector_file_conflicts(tmp_path: Path) -> None:
    """Two compactions of one bucket: the second, computed from the DV file the first
    replaced, must not commit (its file would drop the first one's deletions)."""
    live = Live(SCENARIOS[0], str(tmp_path / "wh"))
    live.write(60)
    live.compact(full=True)
    live.write(40)
    job = CompactJob(live.table, use_processes=False, parallelism=1, clock=CLOCK)
    plan = job.plan()
    stale, _ = job._execute(plan.tasks)
    assert any(r.index_added for r in stale)
    live.compact()  # lands first, replacing the bucket's DV files
    changes = CommitChanges(
        index_added=[e for r in stale for e in r.index_added],
        requirements=[req for r in stale for req in r.requirements])
    with pytest.raises(CommitConflictError, match="DELETION_VECTORS index of bucket"):
        Committer(live.table, clock=CLOCK).commit(changes)


def _corrupt_every_cache_file(directory: Path) -> int:
    count = 0
    for number, path in enumerate(sorted(directory.glob("*.keys"))):
        content = bytearray(path.read_bytes())
        if number % 2:
            content = content[:len(content) // 3]  # truncated
        else:
            content[len(content) // 2] ^= 0xFF  # a flipped byte among the rows
        path.write_bytes(bytes(content))
        count += 1
    return count


@pytest.mark.parametrize("scenario", [SCENARIOS[0], SCENARIOS[2], SCENARIOS[4]],
                         ids=lambda s: s.name)
def test_the_lookup_cache_changes_nothing_cold_warm_or_corrupted(scenario: Scenario,
                                                                  tmp_path: Path) -> None:
    """Twin tables get the same writes; one compacts reading the files above, the other
    through the lookup cache: cold, warm, then with every cache file damaged."""
    plain = Live(scenario, str(tmp_path / "plain"))
    cached = Live(scenario, str(tmp_path / "cached"))
    cache_dir = tmp_path / "cache"
    cache = LookupCacheSettings(str(cache_dir), 1 << 30)
    stats = {"hits": 0, "misses": 0, "discarded": 0}
    for round_no in range(6):
        for live in (plain, cached):
            live.write(60 if round_no == 0 else 30)
        corrupted = _corrupt_every_cache_file(cache_dir) if round_no == 3 else 0
        full = round_no == 0
        plain_summaries = plain.compact(full=full)
        cached_summaries = cached.compact(full=full, cache=cache)
        superseded = [sum(r.rows_superseded for r in s.results) for s in plain_summaries]
        assert superseded == [sum(r.rows_superseded for r in s.results)
                              for s in cached_summaries], f"round {round_no}"
        for key in stats:
            stats[key] += sum(getattr(r, f"cache_{key}") for s in cached_summaries
                              for r in s.results)
        if corrupted:
            assert stats["discarded"] >= 1, "damaged cache files were not noticed"
        rows = read_rows(cached.warehouse, cached.name)
        assert rows.equals(read_rows(plain.warehouse, plain.name)), f"round {round_no}"
        assert rows.equals(cached.expected()), f"round {round_no}"
    assert stats["misses"] > 0 and stats["hits"] > 0, stats


def test_cli_compact_with_a_lookup_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    live = Live(SCENARIOS[2], str(tmp_path / "wh"))  # BIGINT key: fixed-size cached rows
    live.write(60)
    live.compact(full=True)
    live.write(30)
    cache_dir = tmp_path / "cache"
    argv = ["compact", live.warehouse, "--table", live.name, "--lookup-cache", str(cache_dir),
            "--lookup-cache-size", "64 mb"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "older rows marked deleted" in out and "cached now" in out
    assert list(cache_dir.glob("*.keys")), "the cache directory stayed empty"
    assert read_rows(live.warehouse, live.name).equals(live.expected())
    assert main([*argv[:-1], "lots"]) == 2  # a usage error
    assert "--lookup-cache-size" in capsys.readouterr().err


def test_an_upgraded_file_keeps_its_vector(tmp_path: Path) -> None:
    """A level-3 file with a vector, moved to the max level by a full compaction as it is
    (large, alone in its key range, no -U/-D rows): same file, same vector, no new DV file."""
    import dataclasses

    from paimond.lsm.lookup.deletion_vectors import BucketDeletionVectors
    from paimond.lsm.rewrite import execute_compaction
    from paimond.maintenance.compact.plan import plan_compaction

    schema = pa.schema([not_null("id", pa.int64()), ("v", pa.string())])
    writer = TableWriter(catalog_for(str(tmp_path / "wh")), "db.upgrade", schema, primary_keys=["id"],
                     options={"bucket": "1", "deletion-vectors.enabled": "true",
                              "target-file-size": "1 kb"})
    writer.commit([{"id": i, "v": f"v{i}"} for i in range(50)])
    warehouse = str(tmp_path / "wh")
    table = open_table(open_storage(warehouse), warehouse, "db.upgrade")
    (task,) = plan_compaction(table, full=True, moment=NOW).tasks
    result = execute_compaction(dataclasses.replace(task, output_level=3), table.storage,
                                now_millis=lambda: 0)
    # pypaimon rolled the 50 rows into several small key-disjoint files: all move up as they are
    assert result.files_upgraded == len(task.inputs) and result.files_rewritten == 0
    Committer(table, clock=CLOCK).commit(CommitChanges(deleted=result.deleted, added=result.added))
    moved = min(result.added, key=lambda e: e.file.min_sequence_number)
    vectors = BucketDeletionVectors({}, bitmap64=False, base=None)
    vectors.mark(moved.file.file_name, np.array([0, 5], dtype=np.int64))
    entry, _ = vectors.write(table, moved.partition, moved.bucket)
    Committer(table, clock=CLOCK).commit(CommitChanges(index_added=[entry]))
    expected = [i for i in range(50) if i not in (0, 5)]
    assert read_rows(warehouse, "db.upgrade").column("id").to_pylist() == expected

    summary = CompactJob(table, full=True, use_processes=False, clock=CLOCK).run()
    (upgraded,) = summary.results
    assert upgraded.files_upgraded == len(result.added) and upgraded.files_rewritten == 0
    levels = {e.file.file_name: e.file.level for e in upgraded.added}
    assert levels[moved.file.file_name] == 5 and not upgraded.index_added
    assert read_rows(warehouse, "db.upgrade").column("id").to_pylist() == expected
