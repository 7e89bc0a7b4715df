"""Expiry reads only some base manifest lists (``maintenance/expire/base_lists.py``) and deletes
exactly what reading every one of them deletes (the algorithm of Java's ``SnapshotDeletion``):
on pypaimon-written tables with manifest merges (paimond's merge-manifests) and full
compactions at random commits, and a tag, both are run on copies of the same table and must
leave the same files; pypaimon reads the kept snapshots back. The name-only manifest list
reader and the block-header record count agree with the full decoder."""

from __future__ import annotations

import dataclasses
import random
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from support.pk_table_writes import write_pk_table
from support.pypaimon_oracle import read_rows
from support.table_history import assert_exactly_referenced, tree, write_tag

from paimond.clock import Clock
from paimond.errors import CodecError, CorruptFileError
from paimond.format.meta.avro_container import count_records
from paimond.format.meta.manifest_list import (
    ManifestFileMeta,
    decode_manifest_list,
    encode_manifest_list,
)
from paimond.format.meta.snapshot import Snapshot, encode_snapshot
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire import snapshot_deletion
from paimond.maintenance.expire.base_lists import ManifestListCache, base_lists_to_read
from paimond.maintenance.expire.orphans import OrphanJob
from paimond.maintenance.expire.rounds import expire_in_rounds
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import Committer
from paimond.table.commit.manifest_files import ManifestWriter, decode_manifest_list_names
from paimond.table.layout import LATEST_HINT, MANIFEST_DIR
from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
from paimond.table.storage.interface import open_storage

FAR_FUTURE = Clock(fixed_ms=4_102_444_800_000)  # expiry's now: every snapshot is old
PAST = Clock(fixed_ms=1_700_000_000_000)  # paimond's commits while the history is written
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def _table(warehouse: Path) -> Table:
    storage = open_storage(str(warehouse))
    return open_table(storage, storage.root, "db.t")


def _history(warehouse: Path, seed: int, commits: int = 14) -> list[str]:
    """pypaimon commits of a few random rows; after some, paimond merges the manifests
    (forced) or fully compacts; a tag on a middle snapshot. Returns what happened, per
    snapshot."""
    from pypaimon import CatalogFactory, Schema

    rng = random.Random(seed)
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("db", True)
    catalog.create_table("db.t", Schema.from_pyarrow_schema(
        SCHEMA, primary_keys=["id"], options={"bucket": "1", "write-only": "true"}), True)
    pypaimon_table = catalog.get_table("db.t")
    events = []
    for i in range(commits):
        builder = pypaimon_table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        ids = rng.sample(range(20), 3)
        write.write_arrow(pa.table({"id": ids, "v": [f"{i}-{k}" for k in ids]}, schema=SCHEMA))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
        events.append("write")
        table = _table(warehouse)
        roll = rng.random()
        if roll < 0.35:
            Committer(table, clock=PAST).compact_manifests(forced=True)
            events.append("merge-manifests")
        elif roll < 0.5:
            CompactJob(table, clock=PAST, full=True, use_processes=False).run()
            events.append("compact")
        if i == commits // 2:
            latest = table.snapshots.latest()
            assert latest is not None
            write_tag(table, "middle", latest)
    return events


def _every_base_list(table: Table, loaded: Sequence[Snapshot], end_id: int,
                     delta: Callable[[Snapshot], int | None]) -> set[int]:
    """The algorithm before base_lists: every expiring snapshot's base list is read."""
    return {s.id for s in loaded if s.id < end_id}


def _expire(warehouse: Path, settings: ExpireSettings) -> None:
    expire_in_rounds(ExpireJob(_table(warehouse), clock=FAR_FUTURE, settings=settings))


@pytest.mark.parametrize("seed", range(4))
def test_expiry_deletes_what_reading_every_base_list_deletes(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "source"
    events = _history(source, seed)
    assert "merge-manifests" in events
    rng = random.Random(seed)
    settings = ExpireSettings(retain_min=rng.randint(1, 4), time_retained_ms=0,
                              max_deletes=rng.choice([3, 5, 1000]))
    new, old = tmp_path / "new", tmp_path / "old"
    shutil.copytree(source, new)
    shutil.copytree(source, old)

    reads: list[tuple[int, set[int]]] = []
    original = snapshot_deletion.base_lists_to_read

    def spy(table: Table, loaded: Sequence[Snapshot], end_id: int,
            delta: Callable[[Snapshot], int | None]) -> set[int]:
        chosen = original(table, loaded, end_id, delta)
        reads.append((len([s for s in loaded if s.id < end_id]), chosen))
        return chosen

    with monkeypatch.context() as patch:
        patch.setattr(snapshot_deletion, "base_lists_to_read", spy)
        _expire(new, settings)
    with monkeypatch.context() as patch:
        patch.setattr(snapshot_deletion, "base_lists_to_read", _every_base_list)
        _expire(old, settings)

    assert tree(new) == tree(old)
    assert len(tree(new)) < len(tree(source))  # something expired
    assert sum(len(chosen) for _, chosen in reads) < sum(n for n, _ in reads)  # lists skipped
    table = _table(new)
    assert_exactly_referenced(table)
    for snapshot_id in table.snapshots.list_ids():
        assert read_rows(str(new), "db.t", snapshot_id).equals(
            read_rows(str(source), "db.t", snapshot_id))
    assert _read_tag(new, "middle").equals(_read_tag(source, "middle"))


def _read_tag(warehouse: Path, tag: str) -> pa.Table:
    """pypaimon's batch read of a tag, sorted by id."""
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": str(warehouse)}).get_table("db.t")
    builder = table.copy({"scan.tag-name": tag}).new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return rows.sort_by("id")


def test_a_merge_inside_the_range_reads_the_lists_around_it(tmp_path: Path) -> None:
    """Writer commits, a merge, writer commits: the merge commit's base list has fewer
    records than its predecessor's base + delta, so both are read; no other but begin's."""
    warehouse = tmp_path / "wh"
    write_pk_table(str(warehouse), 4)
    table = _table(warehouse)
    merged = Committer(table, clock=PAST).compact_manifests(forced=True)
    write_pk_table(str(warehouse), 3)
    loaded = [table.snapshots.load(i) for i in range(1, 9)]
    cache = ManifestListCache()

    def delta(snapshot: Snapshot) -> int:
        return len(cache.read(table, snapshot.delta_manifest_list, "test"))

    assert getattr(merged, "id", None) == 5
    assert base_lists_to_read(table, loaded, 8, delta) == {1, 4, 5}
    # the end snapshot's base list is read whole anyway: a merge at end reads only before it
    assert base_lists_to_read(table, loaded[:5], 5, delta) == {1, 4}
    # a gap: the snapshot after it and the one before are read
    assert base_lists_to_read(table, loaded[:2] + loaded[3:4] + loaded[5:], 8, delta) == {
        1, 2, 4, 6}


def _lists(warehouse: Path) -> list[Path]:
    return sorted((warehouse / "db.db" / "t" / MANIFEST_DIR).glob("manifest-list-*"))


@pytest.fixture(scope="module")
def written_lists(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The manifest lists of a 3-commit pypaimon table (with pypaimon's extra fields)."""
    warehouse = tmp_path_factory.mktemp("lists") / "wh"
    write_pk_table(str(warehouse), 3)
    return [p.read_bytes() for p in _lists(warehouse)]


@pytest.mark.parametrize("compression", ["zstd", "null", "deflate", "snappy", "xz"])
def test_names_and_counts_agree_with_the_full_decoder(written_lists: list[bytes],
                                                      compression: str) -> None:
    metas = [m for data in written_lists for m in decode_manifest_list(data)] * 400
    for data in [*written_lists, encode_manifest_list(metas, compression=compression)]:
        full = decode_manifest_list(data)
        assert decode_manifest_list_names(data) == [(m.file_name, m.file_size) for m in full]
        assert count_records(data) == len(full)
    assert count_records(data) == len(metas) > 1000  # several Avro blocks


def test_a_damaged_list_is_a_corrupt_file(tmp_path: Path) -> None:
    write_pk_table(str(tmp_path / "wh"), 3)
    table = _table(tmp_path / "wh")
    snapshot = table.snapshots.load(3)
    path = Path(table.file_path(MANIFEST_DIR, snapshot.base_manifest_list))
    data = path.read_bytes()
    with pytest.raises(CodecError):
        decode_manifest_list_names(data[:-20])
    with pytest.raises(CodecError):
        count_records(data[:-20])
    path.write_bytes(data[:-20])
    with pytest.raises(CorruptFileError):
        ManifestListCache().names(table, snapshot.base_manifest_list, "test")


def _crafted_history(warehouse: Path) -> tuple[Table, str]:
    """Snapshots 1..5 as writer commits, except that commits 3 and 4 each rewrite one
    manifest into one (merges that keep the number of manifests): base(3) names M2', which
    commit 4 replaces by M2''. Returns the table and M2' (the manifest only base(3) names)."""
    write_pk_table(str(warehouse), 1)
    table = _table(warehouse)
    first = table.snapshots.load(1)
    where = table.snapshots.path(1)
    (seed,) = read_manifest_list(table, first.delta_manifest_list, where)
    (entry,) = read_manifest(table, seed, where)
    writer = ManifestWriter(table.storage, table.path, [])

    bucket = Path(table.path) / "bucket-0"

    def manifest(i: int) -> ManifestFileMeta:
        file = dataclasses.replace(entry.file, file_name=f"data-crafted-{i}.parquet")
        shutil.copy(bucket / entry.file.file_name, bucket / file.file_name)
        return writer.write_manifest([dataclasses.replace(entry, file=file)])

    def rewrite(meta: ManifestFileMeta) -> ManifestFileMeta:
        return writer.write_manifest(read_manifest(table, meta, where))

    m2 = manifest(2)
    m2_once = rewrite(m2)
    m2_twice = rewrite(m2_once)
    m3, m4, m5 = manifest(3), manifest(4), manifest(5)
    bases = {2: [seed], 3: [seed, m2_once], 4: [seed, m2_twice, m3], 5: [seed, m2_twice, m3, m4]}
    deltas = {2: [m2], 3: [m3], 4: [m4], 5: [m5]}
    for snapshot_id in range(2, 6):
        base, base_size = writer.write_manifest_list(bases[snapshot_id])
        delta, delta_size = writer.write_manifest_list(deltas[snapshot_id])
        snapshot = dataclasses.replace(
            first, id=snapshot_id, base_manifest_list=base, base_manifest_list_size=base_size,
            delta_manifest_list=delta, delta_manifest_list_size=delta_size,
            time_millis=first.time_millis + snapshot_id)
        table.storage.write_bytes(table.snapshots.path(snapshot_id), encode_snapshot(snapshot))
    table.storage.write_bytes(table.snapshots.hint_path(LATEST_HINT), b"5")
    return table, m2_once.file_name


def test_two_count_preserving_merges_leave_one_manifest_to_orphan_removal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The one case base_lists documents: a manifest written by a merge that kept the number
    of manifests and dropped by another such merge, both inside the range, is not deleted by
    expiry (reading every base list deletes it); remove-orphans deletes it, and then both
    tables hold the same files."""
    source = tmp_path / "source"
    _, leaked = _crafted_history(source)
    new, old = tmp_path / "new", tmp_path / "old"
    shutil.copytree(source, new)
    shutil.copytree(source, old)
    settings = ExpireSettings(retain_min=1, time_retained_ms=0, max_deletes=1000)
    _expire(new, settings)
    with monkeypatch.context() as patch:
        patch.setattr(snapshot_deletion, "base_lists_to_read", _every_base_list)
        _expire(old, settings)
    left = set(tree(new)) - set(tree(old))
    assert left == {f"db.db/t/{MANIFEST_DIR}/{leaked}"}
    assert set(tree(old)) <= set(tree(new))
    OrphanJob(_table(new), clock=FAR_FUTURE).run()
    OrphanJob(_table(old), clock=FAR_FUTURE).run()
    assert tree(new) == tree(old)
    assert_exactly_referenced(_table(new))
