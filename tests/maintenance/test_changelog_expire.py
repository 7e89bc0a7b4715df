"""Decoupled changelog lifecycle (Java ``ExpireSnapshotsImpl`` with ``changelogDecoupled``,
``SnapshotDeletion``, ``ExpireChangelogImpl``, ``ChangelogDeletion``): pypaimon-written
primary-key tables (changelog-producer none and input) with a changelog retention above the
snapshot one, expired by paimond.

An independent model, written from Java's rules over the table's history (each data file's
adding and retiring snapshot, its file source, the changelog files each snapshot adds),
decides which snapshots become ``changelog-<id>``, which changelogs expire and which files
stay; the table must hold exactly those files afterwards. Every retained snapshot reads with
pypaimon as before, each ``changelog-<id>`` holds the snapshot's JSON, nothing a retained
snapshot, changelog or tag needs is gone, and nothing is left that nothing references. A crash
campaign kills ``paimond expire-snapshots`` at every new crash point: every snapshot and
changelog a reader can find still reads, and a rerun ends as an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support import warm_python
from support.java_reader import JavaReader, canonical_rows, multiset_diff
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import TableWriter, catalog_for
from support.table_garbage import unreferenced_files
from support.table_history import tree

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.faults import EXIT_CODE
from paimond.format.meta.manifest import FILE_KIND_ADD
from paimond.format.meta.snapshot import Snapshot
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.changelogs import (
    ChangelogHistory,
    ChangelogSettings,
    plan_changelog_expiration,
)
from paimond.maintenance.expire.references import (
    live_data_files,
    read_snapshot_metadata,
    referencing_snapshots,
    used_files,
)
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
from paimond.table.storage.interface import open_storage

NAME, TABLE_DIR = "db.changelogs", "db.db/changelogs"
SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), ("v", pa.string())])
APPEND = 0


def _table(warehouse: Path) -> Table:
    storage = open_storage(str(warehouse))
    return open_table(storage, storage.root, NAME)


def build(warehouse: Path, producer: str, changelog_min: int) -> None:
    """Ten snapshots: pypaimon commits 1-3, a full paimond compaction (4), commits 5-7, a
    full compaction (8), commits 9-10; a tag on snapshot 2."""
    options = {"bucket": "2", "file.format": "parquet", "changelog-producer": producer,
               "changelog.num-retained.min": str(changelog_min)}
    writer = TableWriter(catalog_for(str(warehouse)), NAME, SCHEMA, primary_keys=("id",),
                     options=options)
    table = _table(warehouse)
    for commit in range(1, 11):
        if commit in (4, 8):
            CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
            continue
        writer.commit([{"id": (commit * 7 + i) % 13, "v": f"c{commit}-{i}"} for i in range(6)])
    assert table.snapshots.list_ids() == list(range(1, 11))
    catalog_for(str(warehouse)).get_table(NAME).create_tag("kept", 2)


# ---- the model -----------------------------------------------------------------------------


@dataclass
class DataFile:
    path: str  # relative to the table
    added: int
    retired: int | None  # the snapshot whose delta retires it
    appended: bool  # file source APPEND (or absent)

    def live_in(self, snapshot_id: int) -> bool:
        return self.added <= snapshot_id and (self.retired is None or snapshot_id < self.retired)


@dataclass
class History:
    """What the pristine table holds, read entry by entry from its manifests."""

    snapshots: dict[int, Snapshot]
    snapshot_json: dict[int, object]
    data: dict[str, DataFile]
    changelog_files: dict[str, int]  # path -> the snapshot whose changelog adds it
    tags: dict[str, int]

    @classmethod
    def read(cls, table: Table) -> History:
        snapshots = {i: table.snapshots.load(i) for i in table.snapshots.list_ids()}
        raw = {i: json.loads(table.storage.read_bytes(table.snapshots.path(i))) for i in snapshots}
        data: dict[str, DataFile] = {}
        changelog_files: dict[str, int] = {}
        for i, snapshot in snapshots.items():
            where = table.snapshots.path(i)
            adds, deletes = {}, set()
            for meta in read_manifest_list(table, snapshot.delta_manifest_list, where):
                for entry in read_manifest(table, meta, where):
                    path = f"bucket-{entry.bucket}/{entry.file.file_name}"
                    if entry.kind == FILE_KIND_ADD:
                        adds[path] = entry.file.file_source in (None, APPEND)
                    else:
                        deletes.add(path)
            for path in deletes - adds.keys():
                data[path].retired = i
            for path, appended in adds.items():
                if path not in deletes:
                    data[path] = DataFile(path, i, None, appended)
            if snapshot.changelog_manifest_list:
                for meta in read_manifest_list(table, snapshot.changelog_manifest_list, where):
                    for entry in read_manifest(table, meta, where):
                        changelog_files[f"bucket-{entry.bucket}/{entry.file.file_name}"] = i
        tags = {name: tag.id for name, tag in table.tags().items()}
        return cls(snapshots, raw, data, changelog_files, tags)


@dataclass(frozen=True)
class Expected:
    snapshot_end: int  # snapshots [end, latest] stay
    changelogs: range  # the long-lived changelogs that stay
    data: set[str]  # every file in the bucket directories


def java_model(history: History, *, retain_min: int, changelog_min: int, produce: bool,
               now_ms: int, changelog_time_ms: int = 0) -> Expected:
    """Java's rules: snapshots below latest - retain_min + 1 expire and become changelogs;
    changelogs below latest - changelog_min + 1 (and below the latest changelog, and from
    the first one younger than changelog_time_ms) expire. A data file stays while a
    retained snapshot or tag holds it; without a changelog producer an APPEND file also
    stays until the changelog of the snapshot retiring it expires; a changelog file stays
    while the changelog (or snapshot) adding it stays."""
    latest = max(history.snapshots)
    end = latest - retain_min + 1
    changelog_end = max(1, min(latest - changelog_min + 1, end - 1))
    for changelog_id in range(1, changelog_end + 1 if changelog_end > 1 else 1):
        if now_ms - changelog_time_ms <= history.snapshots[changelog_id].time_millis:
            changelog_end = changelog_id
            break
    held = [*range(end, latest + 1), *history.tags.values()]
    data = set()
    for path, f in history.data.items():
        if any(f.live_in(s) for s in held):
            data.add(path)
        elif not produce and f.appended and f.retired is not None and f.retired >= changelog_end:
            data.add(path)
    data |= {p for p, k in history.changelog_files.items() if k >= changelog_end}
    return Expected(end, range(changelog_end, end), data)


def manifest_names(table: Table, snapshot: Snapshot, where: str, lists: list[str]) -> set[str]:
    names = set(lists)
    for name in lists:
        names |= {m.file_name for m in read_manifest_list(table, name, where)}
    return names


def expected_metadata(table: Table, history: History, expected: Expected, produce: bool
                      ) -> set[str]:
    """Retained snapshots and tags keep every list and manifest; retained changelogs keep
    their base and delta (no producer) or changelog (producer) lists and manifests."""
    names: set[str] = set()
    for i in range(expected.snapshot_end, max(history.snapshots) + 1):
        snapshot = history.snapshots[i]
        names |= manifest_names(table, snapshot, str(i), snapshot.manifest_lists())
    for i in history.tags.values():  # Java protects a tag's data manifests only
        snapshot = history.snapshots[i]
        names |= manifest_names(table, snapshot, str(i), snapshot.manifest_lists()[:2])
    for i in expected.changelogs:
        snapshot = history.snapshots[i]
        lists = ([snapshot.changelog_manifest_list] if produce and snapshot.changelog_manifest_list
                 else [] if produce else [snapshot.base_manifest_list, snapshot.delta_manifest_list])
        names |= manifest_names(table, snapshot, str(i), lists)
    return names


# ---- checks --------------------------------------------------------------------------------


def present(warehouse: Path) -> tuple[set[str], set[str], list[int]]:
    root = warehouse / TABLE_DIR
    data = {str(p.relative_to(root)) for p in root.glob("bucket-*/*") if p.is_file()}
    metadata = {p.name for p in (root / "manifest").iterdir()}
    changelogs = sorted(int(p.name.removeprefix("changelog-"))
                        for p in (root / "changelog").glob("changelog-*"))
    return data, metadata, changelogs


def check_changelogs(warehouse: Path, history: History, produce: bool, what: str) -> list[int]:
    """Every changelog on storage holds its snapshot's JSON and finds every file its readers
    need (no producer: its delta and the files it adds; producer: its changelog files);
    the hints name changelogs on storage. Returns the ids, contiguous."""
    table = _table(warehouse)
    data, metadata, ids = present(warehouse)
    assert ids == list(range(ids[0], ids[-1] + 1)) if ids else True, f"{what}: {ids}"
    directory = warehouse / TABLE_DIR / "changelog"
    for hint in ("EARLIEST", "LATEST"):
        if (directory / hint).exists() and ids:
            assert int((directory / hint).read_text()) in ids, f"{what}: changelog/{hint}"
    for i in ids:
        raw = json.loads((directory / f"changelog-{i}").read_bytes())
        assert raw == history.snapshot_json[i], f"{what}: changelog-{i} differs from snapshot-{i}"
        snapshot = history.snapshots[i]
        lists = ([snapshot.changelog_manifest_list] if produce and snapshot.changelog_manifest_list
                 else [] if produce else [snapshot.delta_manifest_list])
        assert manifest_names(table, snapshot, f"changelog-{i}", lists) <= metadata, what
        needed = ({p for p, k in history.changelog_files.items() if k == i} if produce
                  else {f.path for f in history.data.values() if f.added == i and f.appended})
        assert needed <= data, f"{what}: changelog-{i} misses {sorted(needed - data)}"
        for path in needed:  # and each reads
            pq.read_metadata(warehouse / TABLE_DIR / path)
    return ids


def check_snapshots(warehouse: Path, rows: dict[int, pa.Table], what: str) -> list[int]:
    directory = warehouse / TABLE_DIR / "snapshot"
    ids = sorted(int(p.name.removeprefix("snapshot-")) for p in directory.glob("snapshot-*"))
    assert ids == list(range(ids[0], ids[-1] + 1)), f"{what}: {ids}"
    earliest = directory / "EARLIEST"
    if earliest.exists():
        assert int(earliest.read_text()) in ids, f"{what}: EARLIEST"
    for i in ids:
        assert read_rows(str(warehouse), NAME, snapshot_id=i).equals(rows[i]), f"{what}: {i}"
    return ids


def check_referenced_kept(warehouse: Path) -> None:
    """The names ``used_files`` finds for the retained snapshots and tags are all on storage
    (metadata exactly; data as the live files of each), and nothing unreferenced is left."""
    table = _table(warehouse)
    sources = [s for s in referencing_snapshots(table) if s.kind != "changelog"]
    data, metadata, _ = present(warehouse)
    assert used_files(table, [s for s in sources if s.kind == "snapshot"]).metadata <= metadata
    for tag in (s for s in sources if s.kind == "tag"):  # Java keeps a tag's data manifests
        names = read_snapshot_metadata(table, tag.snapshot, tag.path, changelog=False).names()
        assert names <= metadata, f"{tag.path}: {sorted(names - metadata)}"
    names = {p.rsplit("/", 1)[-1] for p in data}
    for source in sources:
        live = {name for _, _, name in live_data_files(table, source.snapshot, source.path)}
        assert live <= names, f"{source.path}: live files deleted: {sorted(live - names)}"
    assert unreferenced_files(str(warehouse), NAME) == []


# ---- tests ---------------------------------------------------------------------------------


def _settings(table: Table, **changes: object) -> ExpireSettings:
    base = ExpireSettings.of(table.options())
    return dataclasses.replace(base, retain_min=2, time_retained_ms=0, max_deletes=1000,
                               **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize("producer", ["none", "input"])
def test_decoupled_expiry_matches_the_java_model(tmp_path: Path, producer: str) -> None:
    warehouse = tmp_path / "wh"
    build(warehouse, producer, changelog_min=100)
    produce = producer != "none"
    table = _table(warehouse)
    history = History.read(table)
    if produce:  # pypaimon wrote changelog files for its commits
        assert history.changelog_files and all(
            "changelog" in p for p in history.changelog_files)
    rows = {i: read_rows(str(warehouse), NAME, snapshot_id=i) for i in history.snapshots}
    now = max(s.time_millis for s in history.snapshots.values()) + 1

    # 1. changelog.num-retained.min=100: snapshots 1..8 become changelogs, none expires
    result = ExpireJob(table, clock=Clock(fixed_ms=now), settings=_settings(table)).run()
    assert result.changelog is not None and not result.changelog.plan.expires
    expected = java_model(history, retain_min=2, changelog_min=100, produce=produce, now_ms=now)
    assert expected.changelogs == range(1, 9)
    assert "kept 8 expired snapshots as long-lived changelogs" in result.describe()
    data, metadata, changelogs = present(warehouse)
    assert changelogs == list(expected.changelogs)
    assert check_snapshots(warehouse, rows, "after snapshot expiry") == [9, 10]
    check_changelogs(warehouse, history, produce, "after snapshot expiry")
    assert data == expected.data
    assert metadata == expected_metadata(table, history, expected, produce)
    check_referenced_kept(warehouse)
    hints = warehouse / TABLE_DIR / "changelog"
    assert (hints / "LATEST").read_text() == "8"

    # 2. changelog.num-retained.min=6 and a time retention that the model applies
    changelog_time = 60_000
    now2 = history.snapshots[3].time_millis + changelog_time
    before = tree(warehouse / TABLE_DIR)
    dry = ExpireJob(table, clock=Clock(fixed_ms=now2), dry_run=True,
                    settings=_settings(table, changelog_retain_min=6,
                                       changelog_time_retained_ms=changelog_time)).run()
    assert tree(warehouse / TABLE_DIR) == before, "a dry run changed the table"
    result = ExpireJob(table, clock=Clock(fixed_ms=now2),
                       settings=_settings(table, changelog_retain_min=6,
                                          changelog_time_retained_ms=changelog_time)).run()
    expected = java_model(history, retain_min=2, changelog_min=6, produce=produce, now_ms=now2,
                          changelog_time_ms=changelog_time)
    assert dry.changelog is not None and result.changelog is not None
    assert dry.changelog.plan == result.changelog.plan
    data, metadata, changelogs = present(warehouse)
    assert changelogs == list(expected.changelogs)
    if expected.changelogs.start > 1:
        assert f"changelogs 1..{expected.changelogs.start - 1}" in result.describe()
        assert (hints / "EARLIEST").read_text() == str(expected.changelogs.start)
    check_changelogs(warehouse, history, produce, "after changelog expiry")
    assert check_snapshots(warehouse, rows, "after changelog expiry") == [9, 10]
    assert data == expected.data, (sorted(data - expected.data), sorted(expected.data - data))
    assert metadata == expected_metadata(table, history, expected, produce)
    check_referenced_kept(warehouse)

    # 3. the count bound alone: changelogs below latest - 6 + 1 = 5 go
    ExpireJob(table, clock=Clock(fixed_ms=now + 10**9),
              settings=_settings(table, changelog_retain_min=6)).run()
    expected = java_model(history, retain_min=2, changelog_min=6, produce=produce, now_ms=now)
    assert expected.changelogs == range(5, 9)
    data, metadata, changelogs = present(warehouse)
    assert changelogs == [5, 6, 7, 8]
    assert data == expected.data
    assert metadata == expected_metadata(table, history, expected, produce)
    check_changelogs(warehouse, history, produce, "after count bound")
    check_referenced_kept(warehouse)


def test_consumers_hold_changelogs_and_changelog_only_frees_snapshots(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    build(warehouse, "none", changelog_min=3)
    table = _table(warehouse)
    table.storage.write_bytes(table.file_path("consumer", "consumer-reader"),
                              json.dumps({"nextSnapshot": 2}).encode())
    result = ExpireJob(table, clock=Clock(fixed_ms=2**50), settings=_settings(table)).run()
    assert table.snapshots.list_ids()[0] == 2 and result.changelog is not None
    assert present(warehouse)[2] == [1]  # the consumer holds snapshot 2 and changelog 1 on
    only = _settings(table, consumer_changelog_only=True)
    result = ExpireJob(table, clock=Clock(fixed_ms=2**50), settings=only).run()
    assert table.snapshots.list_ids() == [9, 10]
    assert present(warehouse)[2] == [2, 3, 4, 5, 6, 7, 8]  # changelog 1 went, not 2
    assert result.changelog is not None and result.changelog.plan.bound == "consumer"


def test_changelog_plan_follows_java() -> None:
    settings = ChangelogSettings(retain_min=3, retain_max=100, time_retained_ms=10,
                                 max_deletes=50)
    times = {i: 100 * i for i in range(1, 8)}
    history = ChangelogHistory(10, 8, 7, 1, None, times)
    plan = plan_changelog_expiration("t", history, settings, now_ms=10**6)
    assert (plan.end_id, plan.bound) == (7, "latest changelog")  # never the latest changelog
    plan = plan_changelog_expiration("t", history, settings, now_ms=310)
    assert (plan.end_id, plan.bound) == (3, "time-retained")  # changelog 3 is not old enough
    consumer = dataclasses.replace(history, min_consumer_next=2)
    assert plan_changelog_expiration("t", consumer, settings, 10**6).end_id == 2
    limited = dataclasses.replace(settings, max_deletes=2)
    assert plan_changelog_expiration("t", history, limited, 10**6).end_id == 3
    nothing = dataclasses.replace(settings, retain_min=10)
    assert not plan_changelog_expiration("t", history, nothing, 10**6).expires
    by_max = dataclasses.replace(settings, retain_max=5, retain_min=1)  # time checked from 6 on
    plan = plan_changelog_expiration("t", history, by_max, now_ms=310)
    assert (plan.end_id, plan.bound) == (6, "time-retained")


@pytest.mark.parametrize("producer", ["none", "input"])
def test_java_reads_what_decoupled_expiry_keeps(tmp_path: Path, producer: str,
                                                java_reader: JavaReader) -> None:
    """Apache Paimon's own reader finds the retained snapshots and the tag intact."""
    warehouse = tmp_path / "wh"
    build(warehouse, producer, changelog_min=6)
    table = _table(warehouse)
    rows = {i: read_rows(str(warehouse), NAME, snapshot_id=i) for i in (2, 9, 10)}
    ExpireJob(table, clock=Clock(fixed_ms=2**50), settings=_settings(table)).run()
    assert present(warehouse)[2] == [5, 6, 7, 8]
    for snapshot_id, tag in ((9, None), (10, None), (None, "kept")):
        java = java_reader.read_rows(warehouse / TABLE_DIR, snapshot_id=snapshot_id, tag=tag)
        expected = canonical_rows(rows[snapshot_id or 2])
        assert Counter(java) == Counter(expected), multiset_diff(java, expected)


def test_bad_changelog_retention_fails_before_anything_is_deleted(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    build(warehouse, "none", changelog_min=5)
    before = tree(warehouse / TABLE_DIR)
    argv = ["expire-snapshots", str(warehouse), "--table", NAME, "--retain-min", "2",
            "--retain-max", "3", "--older-than", "0 s"]  # changelog max 3 < changelog min 5
    assert main(argv) == 2
    assert tree(warehouse / TABLE_DIR) == before


# ---- the crash campaign --------------------------------------------------------------------

POINTS = {"expire.changelog_written", "expire.changelog_hint_written",
          "expire_changelog.recorded", "expire_changelog.earliest_written",
          "expire_changelog.changelog_file_deleted", "expire_changelog.data_file_deleted",
          "expire_changelog.metadata_file_deleted", "expire_changelog.record_removed"}
ARGV = ["--table", NAME, "--retain-min", "2", "--older-than", "0 s", "--max-deletes", "1000"]


def _run(warehouse: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIMOND_CRASH")}
    return warm_python.run(["-m", "paimond.cli", "expire-snapshots", str(warehouse), *ARGV],
                           clean | env)


def _sample(passes: int) -> list[int]:
    """The first and the last pass (the lead's campaign in test_crash_points samples more)."""
    return sorted({1, passes})


@pytest.mark.parametrize("producer", ["none", "input"])
def test_crash_at_every_point_then_rerun(tmp_path: Path, producer: str) -> None:
    """At the new points, and (no producer) at the deletions of snapshot expiry, which keeps
    other files when decoupled (test_expire_crash kills it everywhere else)."""
    produce = producer != "none"
    pristine = tmp_path / "pristine"
    build(pristine, producer, changelog_min=5)
    history = History.read(_table(pristine))
    rows = {i: read_rows(str(pristine), NAME, snapshot_id=i) for i in history.snapshots}
    traced, trace = tmp_path / "traced", tmp_path / "trace.txt"
    shutil.copytree(pristine, traced)
    done = _run(traced, {"PAIMOND_CRASH_TRACE": str(trace)})
    assert done.returncode == 0, done.stdout + done.stderr
    final = tree(traced / TABLE_DIR)
    assert check_snapshots(traced, rows, "uninterrupted") == [9, 10]
    assert check_changelogs(traced, history, produce, "uninterrupted") == [6, 7, 8]
    check_referenced_kept(traced)
    passes = Counter(trace.read_text().split())
    assert POINTS <= set(passes), sorted(POINTS - set(passes))
    points = POINTS if produce else POINTS | {
        "expire.snapshot_file_deleted", "expire.data_file_deleted", "expire.metadata_file_deleted"}
    cases = [(p, n) for p in sorted(passes) for n in _sample(passes[p]) if p in points]

    def crash(case: tuple[str, int]) -> None:
        point, n = case
        what = f"killed at {point}:{n}"
        warehouse = tmp_path / f"{point}-{n}"
        shutil.copytree(pristine, warehouse)
        died = _run(warehouse, {"PAIMOND_CRASH_AT": f"{point}:{n}"})
        assert died.returncode == EXIT_CODE, f"{what}: {died.returncode}\n{died.stderr}"
        check_snapshots(warehouse, rows, what)
        check_changelogs(warehouse, history, produce, what)
        assert main(["expire-snapshots", str(warehouse), *ARGV]) == 0, f"{what}: rerun failed"
        after = tree(warehouse / TABLE_DIR)
        assert after == final, (f"{what}, then rerun: extra {sorted(set(after) - set(final))}, "
                                f"missing {sorted(set(final) - set(after))}")
        shutil.rmtree(warehouse)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(crash, cases))
    assert len(cases) >= len(POINTS)
