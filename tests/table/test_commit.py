"""The optimistic commit: Paimon-shaped snapshots, conflict checks, races, cleanup."""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, sort_rows

from paimond.clock import Clock
from paimond.errors import CommitConflictError, CorruptFileError
from paimond.format.meta.index_manifest import IndexFileMeta, IndexManifestEntry
from paimond.format.meta.manifest import FILE_KIND_ADD, FILE_KIND_DELETE
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.plan import FULL_COMPACTION_PROPERTY
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import (
    MAX_SEQUENCE_NUMBER_PROPERTY,
    CommitChanges,
    Committer,
    RetryPolicy,
    merged_properties,
)
from paimond.table.commit.index_combiner import combine_index_entries
from paimond.table.scan.snapshot_scan import LiveFile, read_manifest, read_manifest_list, scan_snapshot
from paimond.table.storage.interface import open_storage

CLOCK = Clock(fixed_ms=1_700_000_000_000)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    warehouse = tmp_path_factory.mktemp("commit") / "wh"
    return warehouse, build_pk_deduplicate(str(warehouse))


@pytest.fixture
def table(pristine: tuple[Path, Any], tmp_path: Path) -> tuple[Table, Any, str]:
    warehouse, spec = pristine
    copy = tmp_path / "wh"
    shutil.copytree(warehouse, copy)
    return open_table(open_storage(str(copy)), str(copy), spec.name), spec, str(copy)


def _oldest_level0_per_bucket(table: Table) -> list[LiveFile]:
    latest = table.snapshots.latest()
    assert latest is not None
    oldest = []
    for bucket in scan_snapshot(table, latest).buckets().values():
        files = sorted(bucket.levels[0], key=lambda f: f.meta.max_sequence_number)
        oldest.append(files[0])
    return oldest


def _upgrade(files: list[LiveFile], level: int) -> CommitChanges:
    return CommitChanges(
        deleted=[f.entry for f in files],
        added=[dataclasses.replace(f.entry, file=dataclasses.replace(f.meta, level=level))
               for f in files])


def test_upgrade_commit_is_shaped_like_paimons(table: tuple[Table, Any, str]) -> None:
    tbl, spec, warehouse = table
    before_rows = read_rows(warehouse, spec.name)
    before = tbl.snapshots.latest()
    assert before is not None
    files = _oldest_level0_per_bucket(tbl)
    snapshot = Committer(tbl, clock=CLOCK).commit(_upgrade(files, 5))

    assert snapshot.id == before.id + 1 and tbl.snapshots.latest_id() == snapshot.id
    assert snapshot.commit_kind == "COMPACT" and snapshot.commit_identifier == 2**63 - 1
    assert snapshot.delta_record_count == 0
    assert snapshot.total_record_count == before.total_record_count
    assert snapshot.time_millis == CLOCK.fixed_ms == 1_700_000_000_000
    assert tbl.snapshots.read_hint("LATEST") == snapshot.id
    # Delta manifest: every DELETE before every ADD, identity fields verbatim.
    where = tbl.snapshots.path(snapshot.id)
    [delta_meta] = read_manifest_list(tbl, snapshot.delta_manifest_list, where)
    entries = read_manifest(tbl, delta_meta, where)
    kinds = [e.kind for e in entries]
    assert kinds == sorted(kinds, reverse=True) and kinds.count(FILE_KIND_DELETE) == len(files)
    for deleted, original in zip(entries[: len(files)], files, strict=True):
        assert dataclasses.replace(deleted, kind=FILE_KIND_ADD) == original.entry
    assert delta_meta.num_deleted_files == len(files) == delta_meta.num_added_files
    # Base = previous base + previous delta: nothing of the previous snapshot is lost.
    base = read_manifest_list(tbl, snapshot.base_manifest_list, where)
    previous = tbl.snapshots.path(before.id)
    assert [m.file_name for m in base] == [
        m.file_name for m in read_manifest_list(tbl, before.base_manifest_list, previous)
        + read_manifest_list(tbl, before.delta_manifest_list, previous)]
    # Readers see the same rows; the files moved up a level.
    assert sort_rows(read_rows(warehouse, spec.name), spec.sort_columns).equals(
        sort_rows(before_rows, spec.sort_columns))
    levels = {f.meta.file_name: f.meta.level for f in scan_snapshot(tbl, snapshot).files}
    assert all(levels[f.meta.file_name] == 5 for f in files)


def test_deleting_a_file_that_is_no_longer_live_conflicts(table: tuple[Table, Any, str]) -> None:
    tbl, _, _ = table
    changes = _upgrade(_oldest_level0_per_bucket(tbl), 5)
    Committer(tbl, clock=CLOCK).commit(changes)
    latest = tbl.snapshots.latest_id()
    with pytest.raises(CommitConflictError, match="no longer live"):
        Committer(tbl, clock=CLOCK).commit(changes)
    assert tbl.snapshots.latest_id() == latest


def test_overlapping_files_in_a_level_conflict(table: tuple[Table, Any, str]) -> None:
    tbl, _, _ = table
    latest = tbl.snapshots.latest()
    assert latest is not None
    bucket = next(iter(scan_snapshot(tbl, latest).buckets().values()))
    two = sorted(bucket.levels[0], key=lambda f: f.meta.max_sequence_number)[:2]
    assert len(two) == 2
    with pytest.raises(CommitConflictError, match="LSM conflict"):
        Committer(tbl, clock=CLOCK).commit(_upgrade(two, 3))
    assert tbl.snapshots.latest_id() == latest.id


class _RacingStorage:
    """Lets a concurrent writer commit right before our snapshot create, once."""

    def __init__(self, inner: Any, race: Any) -> None:
        self._inner, self._race = inner, race

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        if self._race is not None and "/snapshot/snapshot-" in path:
            race, self._race = self._race, None
            race()
        return bool(self._inner.create_exclusive(path, data))


def test_losing_the_race_retries_on_top_of_the_concurrent_commit(
        table: tuple[Table, Any, str]) -> None:
    tbl, spec, warehouse = table
    files = _oldest_level0_per_bucket(tbl)
    before = tbl.snapshots.latest()
    assert before is not None

    def concurrent_upgrade() -> None:  # another paimond job upgrades one file first
        Committer(tbl, clock=CLOCK).commit(_upgrade(files[:1], 4))

    racing = dataclasses.replace(tbl, storage=_RacingStorage(tbl.storage, concurrent_upgrade))
    waits: list[float] = []
    with pytest.raises(CommitConflictError, match="no longer live"):
        Committer(racing, sleep=waits.append, clock=CLOCK).commit(_upgrade(files, 5))
    assert len(waits) == 1  # lost the race once, re-read, then saw the conflict
    assert tbl.snapshots.latest_id() == before.id + 1

    racing = dataclasses.replace(tbl, storage=_RacingStorage(
        tbl.storage, lambda: Committer(tbl, clock=CLOCK).commit(_upgrade(files[2:3], 4))))
    snapshot = Committer(racing, sleep=waits.append, clock=CLOCK).commit(_upgrade(files[1:2], 5))
    assert snapshot.id == before.id + 3
    levels = {f.meta.file_name: f.meta.level for f in scan_snapshot(tbl, snapshot).files}
    assert levels[files[0].meta.file_name] == 4
    assert levels[files[1].meta.file_name] == 5
    assert levels[files[2].meta.file_name] == 4, "the concurrent commit survived"
    manifests = {p.name for p in (Path(tbl.path) / "manifest").iterdir()}
    referenced = set()
    for snapshot_id in tbl.snapshots.list_ids():
        s = tbl.snapshots.load(snapshot_id)
        referenced |= {s.base_manifest_list, s.delta_manifest_list}
        where = tbl.snapshots.path(snapshot_id)
        for name in (s.base_manifest_list, s.delta_manifest_list):
            referenced |= {m.file_name for m in read_manifest_list(tbl, name, where)}
    assert manifests == referenced, "files of the lost attempts were removed"
    assert sort_rows(read_rows(warehouse, spec.name), spec.sort_columns).num_rows > 0


def test_gives_up_after_max_retries(table: tuple[Table, Any, str]) -> None:
    tbl, _, _ = table

    class AlwaysTaken:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def create_exclusive(self, path: str, data: bytes) -> bool:
            return False

    stuck = dataclasses.replace(tbl, storage=AlwaysTaken(tbl.storage))
    waits: list[float] = []
    committer = Committer(stuck, retry=RetryPolicy(max_retries=3), sleep=waits.append,
                          clock=CLOCK)
    with pytest.raises(CommitConflictError, match="lost the race"):
        committer.commit(_upgrade(_oldest_level0_per_bucket(tbl), 5))
    assert len(waits) == 3 and waits == sorted(waits)


def _index(partition: bytes, bucket: int, name: str, kind: int = FILE_KIND_ADD) -> IndexManifestEntry:
    return IndexManifestEntry(kind, partition, bucket, IndexFileMeta(
        "DELETION_VECTORS", name, 10, 1, None, None, None))


def test_bucketed_index_combiner() -> None:
    old = [_index(b"p", 0, "dv-a"), _index(b"p", 1, "dv-b"),
           dataclasses.replace(_index(b"p", 0, "hash-a"), index_file=IndexFileMeta(
               "HASH", "hash-a", 4, 1, None, None, None))]
    combined = combine_index_entries(old, [_index(b"p", 1, "dv-b", FILE_KIND_DELETE)],
                                     [_index(b"p", 0, "dv-c")])
    assert sorted(e.index_file.file_name for e in combined) == ["dv-c", "hash-a"]
    assert all(e.kind == FILE_KIND_ADD for e in combined)


def test_empty_changes_are_refused(table: tuple[Table, Any, str]) -> None:
    with pytest.raises(ValueError):
        Committer(table[0], clock=CLOCK).commit(CommitChanges())


def test_a_fixed_clock_stamps_the_snapshot_and_the_compacted_files(
        table: tuple[Table, Any, str]) -> None:
    """The one clock, passed down: the snapshot's ``timeMillis`` is the clock's wall time and
    the files a compaction writes (in worker processes, which get the clock as data) carry
    its local time as ``_CREATION_TIME``; nothing below reads the system clock."""
    tbl, spec, warehouse = table
    before_rows = read_rows(warehouse, spec.name)
    clock = Clock(fixed_ms=1_234_567_890_123)
    local = datetime.datetime.fromtimestamp(1_234_567_890.123)  # naive local wall time
    local_ms = (local - datetime.datetime(1970, 1, 1)) // datetime.timedelta(milliseconds=1)
    assert clock.local_ms() == local_ms

    upgraded = Committer(tbl, clock=clock).commit(_upgrade(_oldest_level0_per_bucket(tbl), 5))
    assert upgraded.time_millis == 1_234_567_890_123
    written = json.loads(tbl.storage.read_bytes(tbl.snapshots.path(upgraded.id)))
    assert written["timeMillis"] == 1_234_567_890_123

    summary = CompactJob(tbl, clock=clock, full=True, parallelism=2, use_processes=True).run()
    assert summary.snapshot is not None and not summary.failures, summary.describe()
    assert summary.snapshot.time_millis == 1_234_567_890_123
    added = [e.file for r in summary.results for e in r.added]
    assert added and {f.creation_time_millis for f in added} == {local_ms}
    latest = scan_snapshot(tbl, summary.snapshot)
    live = {f.meta.file_name: f.meta.creation_time_millis for f in latest.files}
    assert {live[f.file_name] for f in added} == {local_ms}, "as committed in the manifests"
    assert sort_rows(read_rows(warehouse, spec.name), spec.sort_columns).equals(
        sort_rows(before_rows, spec.sort_columns))


def _with_option(tbl: Table, key: str, value: str) -> None:
    """A new schema file with one more option (an ALTER TABLE SET of Java's)."""
    folder = Path(tbl.path) / "schema"
    latest = max(int(p.name.split("-")[1]) for p in folder.glob("schema-*"))
    schema = json.loads((folder / f"schema-{latest}").read_text())
    schema["id"], schema["options"] = latest + 1, {**schema["options"], key: value}
    (folder / f"schema-{latest + 1}").write_text(json.dumps(schema))


def test_snapshot_sequence_tables_carry_the_highest_sequence_number_as_java_does(
        table: tuple[Table, Any, str]) -> None:
    """With ``write.sequence-number-init-mode = snapshot`` Java merges
    `sequence.generation.max-sequence-number` into every commit: the latest snapshot's value,
    or when it has none the highest of every ADD entry of its data manifests, or the added
    files' highest, whichever is higher; paimond's own markers stay beside it. Other tables
    carry none."""
    tbl, _, _ = table
    before = tbl.snapshots.latest()
    assert before is not None and MAX_SEQUENCE_NUMBER_PROPERTY not in (before.properties or {})
    files = _oldest_level0_per_bucket(tbl)
    plain = Committer(tbl, clock=CLOCK).commit(_upgrade(files, 5))
    assert plain.properties is None  # scan mode: no property
    written = max(f.meta.max_sequence_number for f in scan_snapshot(tbl, plain).files)
    assert written > max(f.meta.max_sequence_number for f in files)

    _with_option(tbl, "write.sequence-number-init-mode", "SNAPSHOT")
    files = _oldest_level0_per_bucket(tbl)
    upgraded = Committer(tbl, clock=CLOCK).commit(_upgrade(files, 4))
    # the latest snapshot had none: the table's highest, not only the moved files'
    assert upgraded.properties == {MAX_SEQUENCE_NUMBER_PROPERTY: str(written)}
    # A higher value in the latest snapshot wins over the added files'; markers stay beside.
    higher = dataclasses.replace(upgraded, properties={MAX_SEQUENCE_NUMBER_PROPERTY: "10000000"})
    marked = dataclasses.replace(_upgrade(files, 6), properties={"paimond.marker": "x"})
    assert merged_properties(higher, marked, "snapshot-x", snapshot_sequence=True) == {
        "paimond.marker": "x", MAX_SEQUENCE_NUMBER_PROPERTY: "10000000"}
    assert merged_properties(higher, marked, "snapshot-x", snapshot_sequence=False) == {
        "paimond.marker": "x"}
    with pytest.raises(CorruptFileError, match="snapshot-x.*max-sequence-number"):
        merged_properties(dataclasses.replace(upgraded, properties={
            MAX_SEQUENCE_NUMBER_PROPERTY: "ten"}), marked, "snapshot-x", snapshot_sequence=True)
    # A full compaction: the property survives beside paimond's full-compaction marker.
    summary = CompactJob(tbl, full=True, use_processes=False, clock=CLOCK).run()
    assert not summary.failures
    latest = tbl.snapshots.latest()
    assert latest is not None and latest.properties is not None
    live = scan_snapshot(tbl, latest).files
    assert int(latest.properties[MAX_SEQUENCE_NUMBER_PROPERTY]) == max(
        written, *(f.meta.max_sequence_number for f in live))
    assert latest.properties[FULL_COMPACTION_PROPERTY] == "true"
