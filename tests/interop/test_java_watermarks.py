"""Snapshots found by watermark, against Java Paimon's own ``SnapshotManager`` searches
(``earlierOrEqualWatermark``, ``laterOrEqualWatermark``: the procedures
``rollback_to_watermark`` and ``create_tag_from_watermark``), on snapshots without a
watermark, with ``Long.MIN_VALUE``, with equal ones; then the two commands end to end."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from support.java_maintainer import JavaMaintainer
from support.java_reader import JavaReaders
from support.java_written_tables import create_table, random_rows

from paimond.cli.main import main
from paimond.format.meta.snapshot import decode_snapshot, encode_snapshot
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
from paimond.table.watermarks import earlier_or_equal_watermark, later_or_equal_watermark

LONG_MIN = -(2 ** 63)
WATERMARKS: list[int | None] = [None, LONG_MIN, 10, 10, 20, None, 30, 30, None, 45]


def _watermarked(java: JavaMaintainer, warehouse: Path, watermarks: list[int | None]) -> Path:
    """``db.t`` with a snapshot per watermark, each snapshot file given its watermark."""
    root = create_table(warehouse)
    rng = random.Random(5)
    for _ in watermarks:
        java.write(root, random_rows(rng, 5))
    for snapshot_id, watermark in enumerate(watermarks, start=1):
        path = root / "snapshot" / f"snapshot-{snapshot_id}"
        path.write_bytes(encode_snapshot(dataclasses.replace(
            decode_snapshot(path.read_bytes()), watermark=watermark)))
    return root


def test_searches_find_the_snapshots_java_finds(java_maintainer: JavaMaintainer,
                                                tmp_path: Path) -> None:
    """Every snapshot with a watermark, the common case: Java 2.0 and paimond agree, but for
    a watermark below the first (Java 2.0's earlier-or-equal search answers the first
    snapshot; fixed after 2.0, apache/paimon#9037, where it answers none, as paimond)."""
    for name, expire in (("whole", False), ("expired", True)):
        warehouse = tmp_path / name
        root = _watermarked(java_maintainer, warehouse, [5, 10, 10, 20, 30, 30, 31, 45])
        if expire:
            java_maintainer.expire(root, 5)  # the search starts at snapshot 4 (20)
        snapshots = open_table(open_storage(str(warehouse)), str(warehouse), "db.t").snapshots
        first = 20 if expire else 5
        for watermark in (0, 4, 5, 9, 10, 11, 20, 25, 30, 31, 44, 45, 46, 99):
            for later, ours in ((False, earlier_or_equal_watermark),
                                (True, later_or_equal_watermark)):
                found = ours(snapshots, watermark)
                if not later and watermark < first:
                    assert found is None
                    continue
                assert (found.id if found else None) == java_maintainer.watermark_search(
                    root, watermark, later=later), (name, watermark, later)


def _model(watermarks: dict[int, int | None], watermark: int, *, later: bool) -> set[int]:
    """The snapshots a search may answer (watermarks grow with ids; missing ones and
    ``Long.MIN_VALUE`` are no watermark): any with exactly ``watermark``, else the latest
    below it (earlier-or-equal) or the earliest above it (later-or-equal); empty: none."""
    real = {i: w for i, w in watermarks.items() if w is not None and w != LONG_MIN}
    exact = {i for i, w in real.items() if w == watermark}
    if exact:
        return exact
    if later:
        above = [i for i, w in real.items() if w > watermark]
        return {min(above)} if above else set()
    below = [i for i, w in real.items() if w < watermark]
    return {max(below)} if below else set()


def test_searches_follow_the_model_with_missing_watermarks(java_maintainer: JavaMaintainer,
                                                           tmp_path: Path) -> None:
    """Snapshots without a watermark (null or ``Long.MIN_VALUE``) anywhere: the searches of
    Paimon after apache/paimon#9037 skip them."""
    rng = random.Random(7)
    for case in range(4):
        watermarks: list[int | None] = []
        level = 0
        for _ in range(9):
            if rng.random() < 0.35:
                watermarks.append(rng.choice([None, LONG_MIN]))
            else:
                level += rng.choice([0, 5, 10])
                watermarks.append(level)
        warehouse = tmp_path / f"case{case}"
        _watermarked(java_maintainer, warehouse, watermarks)
        snapshots = open_table(open_storage(str(warehouse)), str(warehouse), "db.t").snapshots
        by_id = dict(enumerate(watermarks, start=1))
        for watermark in range(-5, level + 10, 3):
            for later, search in ((False, earlier_or_equal_watermark),
                                  (True, later_or_equal_watermark)):
                found = search(snapshots, watermark)
                allowed = _model(by_id, watermark, later=later)
                assert (found.id in allowed) if found else not allowed, (
                    watermarks, watermark, later)


def test_rollback_to_watermark_and_a_tag_from_one(java_maintainer: JavaMaintainer,
                                                  java_readers: JavaReaders,
                                                  tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    root = _watermarked(java_maintainer, warehouse, WATERMARKS)
    wh = str(warehouse)
    reader = java_readers.get("2.0")
    at_8 = sorted(reader.read_rows(root, snapshot_id=8))
    assert main(["create-tag", wh, "--table", "db.t", "--tag", "w21",
                 "--from-watermark", "21"]) == 0  # the first at or above 21: snapshot 7
    assert sorted(reader.read_rows(root, tag="w21")) == sorted(
        reader.read_rows(root, snapshot_id=7))
    assert main(["create-tag", wh, "--table", "db.t", "--tag", "none",
                 "--from-watermark", "46"]) == 2
    assert main(["rollback", wh, "--table", "db.t", "--to-watermark", "44", "--yes"]) == 0
    table = open_table(open_storage(wh), wh, "db.t")
    assert table.snapshots.latest_id() == 8  # 30 at 7 and 8; 8 stands for itself
    assert sorted(reader.read_rows(root)) == at_8
    assert main(["rollback", wh, "--table", "db.t", "--to-watermark", "5", "--yes"]) == 2
