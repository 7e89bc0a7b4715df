"""Changelog produced by ``compact`` (``changelog-producer = lookup`` / ``full-compaction``),
checked against an independent model of Paimon's rules and read back by two other readers.

pypaimon writes random changes (inserts, updates, deletes, keys written twice in a commit,
partial updates, sums) and paimond compacts between commits. The model keeps each key's
merged row as of the last compaction ("before") and now ("after"); for every key written
since, the compaction's changelog must be ``+I`` after (nothing before), ``-D`` before
(nothing after), or ``-U`` before then ``+U`` after, left out when equal under
``changelog-producer.row-deduplicate`` (first-row: ``+I`` of new keys only). The changelog of
every COMPACT snapshot is read with pypaimon's streaming changelog planner and with Java
Paimon's incremental changelog scan; all of it applied to an empty table gives the table.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.java_reader import JavaReader, canonical_rows
from support.pypaimon_tables import MergeModel, TableWriter, catalog_for

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.execution import LookupCacheSettings
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

CLOCK = Clock(fixed_ms=1_700_000_000_000)
Row = dict[str, Any]
Change = tuple[str, Row]  # (+I/-U/+U/-D, the row)


@dataclass(frozen=True)
class Case:
    name: str
    options: dict[str, str]
    schema: pa.Schema
    make: Callable[[random.Random], Row]
    retract: bool = False
    aggregates: dict[str, str] = field(default_factory=dict)
    compared: tuple[str, ...] | None = None  # row-deduplicate: the compared columns
    full: bool = False  # compact fully each time (full-compaction producer)
    keys: int = 24
    buckets: int = 1
    cache: bool = False  # look level-0 keys up through the key-lookup cache
    model: type[MergeModel] | None = None  # None: MergeModel (first-row: _FirstRowModel)


_KV = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string()),
                 pa.field("n", pa.int64()), pa.field("rk", pa.string())])


def _small(rng: random.Random) -> Row:
    # few distinct values, so updates to an equal row happen (row-deduplicate)
    return {"v": rng.choice(["a", "b", None]), "n": rng.choice([1, 2, None])}


_KVT = pa.schema([*_KV, pa.field("ts", pa.int64())])


def _timed(rng: random.Random) -> Row:
    return _small(rng) | {"ts": rng.randrange(40)}


def _counts(rng: random.Random) -> Row:
    return {"v": rng.choice(["x", "y"]), "n": rng.randint(1, 5)}


class _SequencedModel(MergeModel):
    """Deduplicate with ``sequence.field=ts``: the greatest ts wins (the later on a tie),
    retractions included; once compaction drops a winning retraction (deletion vectors
    drop them at every level), a later record of the key wins whatever its ts."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.newest: dict[Any, Row] = {}

    def apply(self, row: Row) -> None:
        key = (row["k"],)
        old = self.newest.get(key)
        if old is not None and row["ts"] < old["ts"]:
            return
        self.newest[key] = dict(row)
        if row["rk"] in ("-U", "-D"):
            self.state.pop(key, None)
        else:
            self.state[key] = dict(row)

    def compacted(self) -> None:
        self.newest = {k: r for k, r in self.newest.items() if k in self.state}


CASES = [
    Case("dedup", {"changelog-producer": "lookup"}, _KV, _small, retract=True),
    Case("dedup_cached", {"changelog-producer": "lookup"}, _KV, _small, retract=True,
         cache=True),
    Case("dedup_row_dedupe", {"changelog-producer": "lookup",
                              "changelog-producer.row-deduplicate": "true",
                              "changelog-producer.row-deduplicate-ignore-fields": "rk"},
         _KV, _small, retract=True, compared=("k", "v", "n")),
    Case("partial_update", {"changelog-producer": "lookup", "merge-engine": "partial-update"},
         _KV, _small),
    Case("aggregation", {"changelog-producer": "lookup", "merge-engine": "aggregation",
                         "fields.n.aggregate-function": "sum"}, _KV, _counts,
         aggregates={"n": "sum"}),
    Case("first_row", {"changelog-producer": "lookup", "merge-engine": "first-row"},
         _KV, _small),
    Case("dedup_dv", {"changelog-producer": "lookup", "deletion-vectors.enabled": "true"},
         _KV, _small, retract=True),
    Case("partial_update_dv_two_buckets", {"changelog-producer": "lookup",
                                           "merge-engine": "partial-update",
                                           "deletion-vectors.enabled": "true"},
         _KV, _small, buckets=2, cache=True),
    Case("dedup_sequence_field_dv", {"changelog-producer": "lookup", "sequence.field": "ts",
                                     "deletion-vectors.enabled": "true"},
         _KVT, _timed, retract=True, model=_SequencedModel),
    Case("full_compaction", {"changelog-producer": "full-compaction"}, _KV, _small,
         retract=True, full=True),
    Case("full_compaction_row_dedupe", {"changelog-producer": "full-compaction",
                                        "changelog-producer.row-deduplicate": "true"},
         _KV, _small, retract=True, full=True, compared=("k", "v", "n", "rk")),
]


class _FirstRowModel(MergeModel):
    def apply(self, row: Row) -> None:
        key = tuple(row[k] for k in self.keys)
        self.state.setdefault(key, dict(row))


def _expected(case: Case, before: dict[Any, Row], after: dict[Any, Row],
              touched: set[Any]) -> list[Change]:
    """Paimon's changelog of one compaction, in key order."""
    out: list[Change] = []
    for key in sorted(touched):
        old, new = before.get(key), after.get(key)
        if case.options.get("merge-engine") == "first-row":
            if old is None and new is not None:
                out.append(("+I", new))
        elif old is None and new is not None:
            out.append(("+I", new))
        elif old is not None and new is None:
            out.append(("-D", old))
        elif old is not None and new is not None:
            if case.compared is None or any(old[c] != new[c] for c in case.compared):
                out += [("-U", old), ("+U", new)]
    return out


def _changes(rng: random.Random, model: MergeModel, count: int, case: Case) -> tuple[list[Row],
                                                                                   set[Any]]:
    rows: list[Row] = []
    touched: set[Any] = set()
    for _ in range(count):
        key = rng.randrange(case.keys)
        live = (key,) in model.state
        row = {"k": key} | case.make(rng)
        kinds = ["+U" if live else "+I"]
        roll = rng.random()
        if case.retract and live and roll < 0.25:
            kinds = ["-D"]
        elif case.retract and live and roll < 0.45:
            kinds = ["-U", "+U"]
        elif case.retract and not live and roll < 0.1:
            kinds = ["-D"]  # of an absent key: no changelog
        for kind in kinds:
            record = (dict(model.state[(key,)]) if kind == "-U" else dict(row)) | {"rk": kind}
            model.apply(record)
            rows.append(record)
        touched.add((key,))
    return rows, touched


def _pypaimon_changelog(py_table: Any, snapshot_id: int) -> list[Change]:
    """pypaimon's streaming changelog plan of one snapshot, read with row kinds."""
    builder = py_table.new_stream_read_builder().with_include_row_kind(True)
    snapshot = py_table.snapshot_manager().get_snapshot_by_id(snapshot_id)
    plan = builder.new_streaming_scan()._create_changelog_plan(snapshot)
    rows = builder.new_read().to_arrow(plan.splits()).to_pylist()
    return [(r.pop("_row_kind"), r) for r in rows]


def _key_ordered(changes: Sequence[Change]) -> list[Change]:
    """Stable by key: a key's -U stays before its +U, as each file holds them."""
    return sorted(changes, key=lambda c: c[1]["k"])


def _apply(state: dict[Any, Row], changes: Sequence[Change]) -> None:
    for kind, row in changes:
        if kind in ("+I", "+U"):
            state[(row["k"],)] = row
        else:
            assert state.pop((row["k"],)) == row  # a retraction names the row it retracts


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_changelog_matches_model_and_readers(case: Case, tmp_path: Path,
                                             java_reader: JavaReader) -> None:
    warehouse = str(tmp_path)
    options = {"bucket": str(case.buckets), "rowkind.field": "rk"} | case.options
    writer = TableWriter(catalog_for(warehouse), "db.t", case.schema, primary_keys=["k"],
                     options=options)
    engine = options.get("merge-engine", "deduplicate")
    model_type = case.model or (_FirstRowModel if engine == "first-row" else MergeModel)
    model = model_type(engine, ["k"], case.aggregates)
    if engine == "first-row":
        model.engine = "first-row"
    table = open_table(open_storage(warehouse), warehouse, "db.t")
    rng = random.Random(case.name)
    before: dict[Any, Row] = {}
    touched: set[Any] = set()
    replayed: dict[Any, Row] = {}
    compactions = looked_up = cached = 0
    for commit in range(7):
        rows, keys = _changes(rng, model, rng.randint(4, 16), case)
        writer.commit(rows)
        touched |= keys
        if commit % 3 == 1:
            continue  # level 0 piles up: one compaction covers two commits
        cache = LookupCacheSettings(str(tmp_path / "cache")) if case.cache else None
        summary = CompactJob(table, full=case.full, clock=CLOCK, use_processes=False,
                             lookup_cache=cache).run()
        assert summary.snapshot is not None
        snapshot = summary.snapshot
        looked_up += sum(len(r.task.lookup_files) for r in summary.results)
        cached += sum(r.cache_hits + r.cache_misses for r in summary.results)
        after = {k: dict(r) for k, r in model.state.items()}
        expected = _expected(case, before, after, touched)
        got = _pypaimon_changelog(writer.table, snapshot.id)
        if case.buckets == 1:
            assert _key_ordered(got) == got  # written in key order
        assert _key_ordered(got) == expected, f"compaction {compactions}"
        if expected:
            assert snapshot.changelog_record_count == len(expected)
            assert snapshot.changelog_manifest_list is not None
            java = java_reader.read(tmp_path / "db.db" / "t",
                                    incremental=(snapshot.id - 1, snapshot.id),
                                    scan_mode="changelog")
            frame = pa.Table.from_pylist([r for _, r in expected], schema=writer.read_schema)
            assert sorted(zip(java.row_kinds, java.rows, strict=True)) == sorted(zip(
                [k for k, _ in expected], canonical_rows(frame), strict=True))
        else:
            assert snapshot.changelog_manifest_list is None
            assert snapshot.changelog_record_count is None
        _apply(replayed, got)
        if isinstance(model, _SequencedModel):
            model.compacted()
        before, touched = after, set()
        compactions += 1
    # the changelog replayed is the table (but for the fields row-deduplicate ignores)
    columns = case.compared or tuple(case.schema.names)
    assert {k: [r[c] for c in columns] for k, r in replayed.items()} == {
        k: [r[c] for c in columns] for k, r in model.state.items()}
    assert compactions == 5
    # and the table itself reads as the model (Java merges lookup tables as LookupMergeFunction)
    rows = java_reader.read_rows(tmp_path / "db.db" / "t")
    state = pa.Table.from_pylist(list(model.state.values()), schema=writer.read_schema)
    assert sorted(rows) == sorted(canonical_rows(state))
    assert case.full or looked_up  # level-0 keys were looked up in files above the output
    assert bool(cached) == case.cache


def test_changelog_files_named_and_registered(tmp_path: Path) -> None:
    """Changelog files: ``changelog-file.prefix``/``.format``, level of the output, in the
    COMPACT snapshot's changelog manifests only (never live data), and counted."""
    warehouse = str(tmp_path)
    writer = TableWriter(catalog_for(warehouse), "db.t", _KV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": "lookup", "changelog-file.prefix": "cl-",
        "changelog-file.format": "avro", "file.format": "parquet"})
    writer.commit([{"k": i, "v": "a", "n": i, "rk": "+I"} for i in range(5)])
    table = open_table(open_storage(warehouse), warehouse, "db.t")
    job = CompactJob(table, clock=CLOCK, use_processes=False)
    assert "changelog: lookup]" in job.plan().describe()  # the dry run says so
    summary = job.run()
    assert "changelog (lookup): 5 rows in 1 file(s)" in summary.describe()
    snapshot = summary.snapshot
    assert snapshot is not None and snapshot.commit_kind == "COMPACT"
    from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
    where = table.snapshots.path(snapshot.id)
    entries = [e for m in read_manifest_list(table, snapshot.changelog_manifest_list, where)
               for e in read_manifest(table, m, where)]
    assert [(e.file.file_name.startswith("cl-"), e.file.file_name.endswith(".avro"),
             e.file.row_count, e.file.level) for e in entries] == [(True, True, 5, 5)]
    live = {f.entry.file.file_name for f in scan_snapshot(table, snapshot).files}
    assert entries[0].file.file_name not in live
    assert snapshot.changelog_record_count == 5


def test_full_compaction_producer_compacts_fully_at_every_writer_commit(tmp_path: Path) -> None:
    """Java's streaming writers of a full-compaction table compact fully at every commit
    (``full-compaction.delta-commits`` unset: 1); a plain ``compact`` does so here, and the
    changelog is the difference to the previous top level."""
    warehouse = str(tmp_path)
    writer = TableWriter(catalog_for(warehouse), "db.t", _KV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": "full-compaction"})
    table = open_table(open_storage(warehouse), warehouse, "db.t")
    writer.commit([{"k": 1, "v": "a", "n": 1, "rk": "+I"}])
    first = CompactJob(table, clock=CLOCK, use_processes=False)
    plan = first.plan()
    assert plan.full and plan.full_reason == \
        "1 writer commits since the last one (changelog-producer=full-compaction)"
    assert first.run().snapshot is not None
    assert CompactJob(table, clock=CLOCK, use_processes=False).plan().tasks == ()
    writer.commit([{"k": 1, "v": "b", "n": 1, "rk": "+U"}, {"k": 2, "v": "c", "n": 2, "rk": "+I"}])
    snapshot = CompactJob(table, clock=CLOCK, use_processes=False).run().snapshot
    assert snapshot is not None
    assert [(k, r["k"], r["v"]) for k, r in _pypaimon_changelog(writer.table, snapshot.id)] == [
        ("-U", 1, "a"), ("+U", 1, "b"), ("+I", 2, "c")]
    levels = {f.entry.file.level for f in scan_snapshot(table, snapshot).files}
    assert levels == {5}


def test_orphan_removal_keeps_and_expiry_deletes_changelog_files(tmp_path: Path) -> None:
    """A changelog file a snapshot names survives orphan removal (any window); expiring that
    snapshot deletes it, and a rerun of orphan removal finds nothing more."""
    from paimond.maintenance.expire.orphans import OrphanJob
    from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings

    warehouse = str(tmp_path)
    writer = TableWriter(catalog_for(warehouse), "db.t", _KV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": "lookup"})
    table = open_table(open_storage(warehouse), warehouse, "db.t")
    for round_ in range(3):
        writer.commit([{"k": i, "v": str(round_), "n": i, "rk": "+I"} for i in range(4)])
        assert CompactJob(table, clock=CLOCK, use_processes=False).run().snapshot is not None
    bucket = tmp_path / "db.db" / "t" / "bucket-0"
    changelog = sorted(p.name for p in bucket.glob("changelog-*"))
    assert len(changelog) == 3
    later = Clock(fixed_ms=4_000_000_000_000)  # every file is older than any window
    OrphanJob(table, later, older_than_ms=later.wall_ms() - 1, force=True).run()
    assert sorted(p.name for p in bucket.glob("changelog-*")) == changelog
    ExpireJob(table, later, ExpireSettings(retain_min=1, retain_max=1, time_retained_ms=0,
                                           produce_changelog=True)).run()
    from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
    latest = table.snapshots.latest()
    assert latest is not None and latest.changelog_manifest_list is not None
    where = table.snapshots.path(latest.id)
    kept = [e.file.file_name for m in read_manifest_list(table, latest.changelog_manifest_list,
                                                         where)
            for e in read_manifest(table, m, where)]
    # the retained (last) snapshot keeps its changelog; the expired ones' are deleted
    assert sorted(p.name for p in bucket.glob("changelog-*")) == kept and len(kept) == 1
    assert not OrphanJob(table, later, older_than_ms=later.wall_ms() - 1, force=True).run() \
        .removed.files


def test_decoupled_changelog_keeps_compaction_changelog_then_expires_it(tmp_path: Path) -> None:
    """changelog.num-retained above the snapshot retention: expired COMPACT snapshots live on
    as long-lived changelogs with their changelog files; expiring those deletes the files."""
    import dataclasses

    from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings

    warehouse = str(tmp_path)
    writer = TableWriter(catalog_for(warehouse), "db.t", _KV, primary_keys=["k"], options={
        "bucket": "1", "changelog-producer": "lookup", "changelog.num-retained.min": "10"})
    table = open_table(open_storage(warehouse), warehouse, "db.t")
    for round_ in range(3):
        writer.commit([{"k": i, "v": str(round_), "n": i, "rk": "+I"} for i in range(4)])
        assert CompactJob(table, clock=CLOCK, use_processes=False).run().snapshot is not None
    bucket = tmp_path / "db.db" / "t" / "bucket-0"
    files = sorted(p.name for p in bucket.glob("changelog-*"))
    assert len(files) == 3
    later = Clock(fixed_ms=4_000_000_000_000)
    settings = dataclasses.replace(ExpireSettings.of(table.options()), retain_min=1,
                                   retain_max=1, time_retained_ms=0, max_deletes=1000,
                                   changelog_retain_max=100)
    ExpireJob(table, later, settings).run()
    assert table.snapshots.list_ids() == [6]
    assert len(list((tmp_path / "db.db" / "t" / "changelog").glob("changelog-*"))) == 5
    assert sorted(p.name for p in bucket.glob("changelog-*")) == files  # all still named
    ExpireJob(table, later, dataclasses.replace(settings, changelog_retain_min=1,
                                                changelog_retain_max=2,
                                                changelog_time_retained_ms=0)).run()
    from paimond.maintenance.expire.references import referencing_snapshots, used_files
    left = sorted(p.name for p in bucket.glob("changelog-*"))
    assert 1 <= len(left) < 3  # the expired changelogs' files went, the kept ones' stay
    assert set(left) == set(files) & used_files(table, referencing_snapshots(table)).data


def test_force_lookup_merges_as_a_lookup_table(tmp_path: Path) -> None:
    """``force-lookup=true`` (no changelog, no vectors): Java reads such a table as its
    ``LookupMergeFunction`` merges, each key from the lowest level holding it, so compaction
    must merge level-0 versions with that version (a sum would else lose the older total).
    The table is read here as Java would: files listed from the manifests, decoded with
    pyarrow, each key's row taken from its lowest level."""
    import pyarrow.parquet as pq

    warehouse = str(tmp_path)
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("n", pa.int64())])
    writer = TableWriter(catalog_for(warehouse), "db.t", schema, primary_keys=["k"], options={
        "bucket": "1", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
        "force-lookup": "true", "file.format": "parquet"})
    table = open_table(open_storage(warehouse), warehouse, "db.t")
    rng = random.Random(7)
    totals: dict[int, int] = {}
    for _ in range(5):
        rows = [{"k": rng.randrange(12), "n": rng.randint(1, 9)} for _ in range(10)]
        for row in rows:
            totals[row["k"]] = totals.get(row["k"], 0) + row["n"]
        writer.commit(rows)
        summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
        assert summary.snapshot is not None
        assert not summary.results[0].changelog  # no changelog producer
    latest = table.snapshots.latest()
    assert latest is not None
    files = scan_snapshot(table, latest).files
    assert len({f.entry.file.level for f in files}) > 1  # stale versions in deeper levels
    lowest: dict[int, tuple[int, int]] = {}
    for f in files:
        path = tmp_path / "db.db" / "t" / "bucket-0" / f.entry.file.file_name
        for row in pq.read_table(path).to_pylist():
            level = f.entry.file.level
            if row["k"] not in lowest or level < lowest[row["k"]][0]:
                lowest[row["k"]] = (level, row["n"])
    assert {k: n for k, (_, n) in lowest.items()} == totals
