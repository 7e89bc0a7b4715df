"""Java's own maintenance as the reference: Apache Paimon (the newest release the suite has,
tests/support/java_maintainer.py) writes the same write-only commits into two copies of a
table; Java's dedicated compaction maintains one, paimond the other. Then, per table kind:

- rows: Java reads the same rows from both copies at the latest snapshot;
- changelog: the compaction's changelog (Java's incremental changelog read between the
  snapshot before and the latest) is the same multiset of row kind + row;
- levels: every bucket has the same number of files at each level;
- commits: both compact (a minor compaction after five writer commits reaches the sorted-run
  trigger; the full one follows three more);
- Java continues: Java writes more commits into both copies and compacts them (minor, then
  full) on top of what paimond wrote, without an error, and both copies read alike again;
- expire + tag: a tag on both, then Java's and paimond's snapshot expiry keep the same
  snapshots, each (and the tag) reads alike, the same number of data and changelog files stays
  in each bucket, and Java's own expiry then works on paimond's copy.

A minor compaction (Java's picker run once per bucket) is compared the same way before the
full one. `test_zz_report` prints the table kind x check matrix.
"""

from __future__ import annotations

import collections
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.java_maintainer import JavaMaintainer
from support.java_reader import JavaReader, JavaReaders, available, multiset_diff
from support.pypaimon_tables import catalog_for

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

CLOCK = Clock(fixed_ms=1_800_000_000_000)
SCHEMA = pa.schema([pa.field("p", pa.int32(), nullable=False),
                    pa.field("k", pa.int32(), nullable=False),
                    ("a", pa.string()), ("b", pa.int64()), ("c", pa.int32())])
PK_KINDS: dict[str, dict[str, str]] = {
    "dedup": {},
    "dedup-dv": {"deletion-vectors.enabled": "true"},
    "dedup-dv-bitmap64": {"deletion-vectors.enabled": "true",
                          "deletion-vectors.bitmap64": "true"},
    "changelog-lookup": {"changelog-producer": "lookup"},
    "changelog-full-compaction": {"changelog-producer": "full-compaction"},
    "partial-update-sequence-group": {"merge-engine": "partial-update",
                                      "fields.c.sequence-group": "a"},
    "aggregation": {"merge-engine": "aggregation", "fields.a.aggregate-function": "listagg",
                    "fields.b.aggregate-function": "sum", "fields.c.aggregate-function": "max"},
    "aggregation-first-min-product": {
        "merge-engine": "aggregation", "fields.a.aggregate-function": "first_non_null_value",
        "fields.b.aggregate-function": "min", "fields.c.aggregate-function": "product"},
    "first-row": {"merge-engine": "first-row"},
    "dynamic-bucket": {"bucket": "-1", "dynamic-bucket.target-row-num": "12"},
}
APPEND_KINDS: dict[str, dict[str, str]] = {
    "append-bucketed": {"bucket": "2", "bucket-key": "k"},
    "append-unaware": {"bucket": "-1"},
}
# Kinds whose writers may send deletions (the others' merge engines refuse or drop them).
WITH_DELETES = {"dedup", "dedup-dv", "dedup-dv-bitmap64", "changelog-lookup",
                "changelog-full-compaction", "dynamic-bucket"}
RESULTS: dict[str, dict[str, str]] = collections.defaultdict(dict)


def _rows(rng: random.Random, count: int, deletes: bool) -> list[list[Any]]:
    rows = []
    for _ in range(count):
        kind = "-D" if deletes and rng.random() < 0.15 else "+I"
        rows.append([kind, rng.choice([1, 2]), rng.randint(0, 24),
                     rng.choice([None, "x", "y", "z"]), rng.randint(-50, 50),
                     rng.choice([None, rng.randint(0, 9)])])
    return rows


def _create(warehouse: Path, name: str, options: dict[str, str], primary: bool) -> Path:
    catalog = catalog_for(str(warehouse))
    catalog.create_database("db", True)
    table_options = {"bucket": "2", **options}
    catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["p"], primary_keys=["p", "k"] if primary else None,
        options=table_options), False)
    return warehouse / "db.db" / name


def _levels(path: Path) -> collections.Counter[tuple[bytes, int, int]]:
    table = _open(path)
    latest = table.snapshots.latest()
    assert latest is not None
    return collections.Counter((f.entry.partition, f.entry.bucket, f.entry.file.level)
                               for f in scan_snapshot(table, latest).files)


def _open(path: Path) -> Table:
    return open_table(open_storage(str(path.parents[1])), str(path.parents[1]),
                      f"db.{path.name}")


def _paimond_compact(path: Path, full: bool) -> None:
    summary = CompactJob(_open(path), full=full, use_processes=False, clock=CLOCK).run()
    assert not summary.failures, summary.describe()


def _check(kind: str, check: str, run: Callable[[], None]) -> None:
    try:
        run()
    except Exception:
        RESULTS[kind][check] = "FAIL"
        raise
    RESULTS[kind][check] = "PASS"


@pytest.fixture
def reader(java_readers: JavaReaders) -> JavaReader:
    return available(java_readers, "2.0")


@pytest.mark.parametrize("kind", sorted(PK_KINDS) + sorted(APPEND_KINDS))
def test_paimond_maintains_as_java_does(kind: str, java_maintainer: JavaMaintainer,
                                        reader: JavaReader, tmp_path: Path) -> None:
    primary = kind in PK_KINDS
    rng = random.Random(f"differential-{kind}")
    source = _create(tmp_path / "written", "t", {**PK_KINDS, **APPEND_KINDS}[kind], primary)
    for _ in range(5):
        java_maintainer.write(source, _rows(rng, 30, primary and kind in WITH_DELETES),
                              assigner=str(tmp_path))
    if kind == "dynamic-bucket":  # the assigner opened more buckets than one per partition
        assert len({(p, b) for p, b, _ in _levels(source)}) > 2
    java_copy, ours = tmp_path / "java" / "db.db" / "t", tmp_path / "paimond" / "db.db" / "t"
    shutil.copytree(source.parents[1], java_copy.parents[1])
    shutil.copytree(source.parents[1], ours.parents[1])

    def same_rows(label: str) -> None:
        theirs, mine = reader.read(java_copy), reader.read(ours)
        diff = multiset_diff(mine.rows, theirs.rows)
        assert not diff, f"{kind} {label}: paimond's copy (left) vs Java's (right): {diff}"
        assert mine.rows, f"{kind} {label}: no rows"

    def same_levels(label: str) -> None:
        assert _levels(ours) == _levels(java_copy), f"{kind} {label}: levels differ"

    for full in (False, True):
        step = "full" if full else "minor"
        if full:  # more writer commits first, so that the full compaction has work
            for _ in range(3):
                rows = _rows(rng, 30, primary and kind in WITH_DELETES)
                for copy in (java_copy, ours):
                    java_maintainer.write(copy, rows, assigner=str(tmp_path))
        before = _open(ours).snapshots.latest_id()
        java_maintainer.compact(java_copy, full=full)
        _paimond_compact(ours, full)
        _check(kind, f"{step}: rows", lambda s=step: same_rows(s))
        _check(kind, f"{step}: levels", lambda s=step: same_levels(s))
        java_after = _open(java_copy).snapshots.latest_id()
        ours_after = _open(ours).snapshots.latest_id()
        # The same decision to commit; each step has work (5 sorted runs reach the trigger,
        # the full compaction has the 3 newer commits' level-0 files), except the full step
        # of a bucket-unaware table: its coordinator has no full mode, and 1 + 3 files per
        # partition are below compaction.min.file-num (5), for Java as for paimond.
        assert (java_after != before) == (ours_after != before), (kind, step)
        assert ours_after != before or (full and kind == "append-unaware"), (kind, step)
        if "changelog-producer" in PK_KINDS.get(kind, {}) and before is not None:

            def same_changelog(b: int = before, j: int = java_after, o: int = ours_after,
                               step: str = step) -> None:
                theirs = reader.read(java_copy, incremental=(b, j), scan_mode="changelog")
                mine = reader.read(ours, incremental=(b, o), scan_mode="changelog")
                diff = multiset_diff([f"{k} {r}" for k, r in zip(mine.row_kinds, mine.rows,
                                                                 strict=True)],
                                     [f"{k} {r}" for k, r in zip(theirs.row_kinds, theirs.rows,
                                                                 strict=True)])
                assert not diff, f"{kind} {step} changelog: paimond (left) vs Java: {diff}"

            _check(kind, f"{step}: changelog", same_changelog)

    def java_continues() -> None:
        more = [_rows(rng, 30, primary and kind in WITH_DELETES) for _ in range(3)]
        for copy in (java_copy, ours):
            for rows in more:
                java_maintainer.write(copy, rows, assigner=str(tmp_path))
            java_maintainer.compact(copy, full=False)
        same_rows("after Java's writes and minor compaction on top")
        for copy in (java_copy, ours):
            java_maintainer.compact(copy, full=True)
        same_rows("after Java's full compaction on top")
        same_levels("after Java's full compaction on top")

    _check(kind, "Java continues", java_continues)

    def expiry() -> None:
        """Both keep 3 snapshots and a tag: the same snapshots stay, each reads alike, the
        same number of data and changelog files stays in every bucket, and Java's own
        expiry then works on paimond's copy."""
        tagged = _open(ours).snapshots.list_ids()[-4]
        for copy in (java_copy, ours):
            java_maintainer.tag(copy, "kept", tagged)
        java_maintainer.expire(java_copy, 3)
        settings = ExpireSettings(retain_min=3, retain_max=3, time_retained_ms=0,
                                  max_deletes=100_000)
        ExpireJob(_open(ours), clock=Clock(), settings=settings).run()
        kept = _open(ours).snapshots.list_ids()
        assert kept == _open(java_copy).snapshots.list_ids() and len(kept) == 3
        for snapshot_id in kept:
            theirs = reader.read(java_copy, snapshot_id=snapshot_id)
            assert not multiset_diff(reader.read(ours, snapshot_id=snapshot_id).rows,
                                     theirs.rows), (kind, snapshot_id)
        assert not multiset_diff(reader.read(ours, tag="kept").rows,
                                 reader.read(java_copy, tag="kept").rows)
        assert _file_counts(ours) == _file_counts(java_copy)
        java_maintainer.expire(ours, 1)
        same_rows("after Java's expiry of paimond's copy")
        assert reader.read(ours, tag="kept").rows

    _check(kind, "expire + tag", expiry)


def _file_counts(path: Path) -> collections.Counter[tuple[str, str]]:
    """Data and changelog files per bucket directory (their names differ between copies)."""
    return collections.Counter(
        (str(f.parent.relative_to(path)), f.name.split("-", 1)[0]) for f in path.rglob("*")
        if f.is_file() and f.name.startswith(("data-", "changelog-"))
        and ".paimond" not in f.parts)


def test_zz_report() -> None:
    """Runs last (file order): the kind x check matrix, for the closing note."""
    checks = sorted({c for r in RESULTS.values() for c in r})
    lines = ["| table kind | " + " | ".join(checks) + " |",
             "|---|" + "---|" * len(checks)]
    for kind in sorted(RESULTS):
        lines.append(f"| {kind} | " + " | ".join(RESULTS[kind].get(c, "-") for c in checks)
                     + " |")
    print("\n" + "\n".join(lines))
    assert RESULTS, "no differential ran"
