"""Chain tables as Java Paimon 2.0 makes, writes and reads them: paimond's compact-chain-table
writes a partition into the snapshot branch with exactly the rows Java's chain read gives it
(the nearest earlier snapshot partition merged with the delta partitions after it, deletes
and deletion vectors included), so Java reads the same table before and after; every Java
release reads the snapshot branch's new partition as those rows."""

from __future__ import annotations

import datetime
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.chain_tables import chain_table_for_java
from support.java_maintainer import JavaMaintainer
from support.java_reader import JavaReader, JavaReaders

from paimond.cli.main import main
from paimond.table.catalog import open_table
from paimond.table.layout import partition_text
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

CHAIN_RELEASE = "2.0"  # the first release with chain tables among the suite's
def _full(dt: str, keys: str, version: str) -> list[list[Any]]:
    return [["+I", k, version, f"{k}@{dt}", dt] for k in keys]


def _rows_of(reader: JavaReader, path: str, dt: str) -> list[str]:
    return sorted(r for r in reader.read_rows(path) if json.loads(r)[3] == dt)


def _compact(warehouse: Path, partition: str, *extra: str) -> dict[str, Any]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["compact-chain-table", str(warehouse), "--table", "db.c",
                     "--partition", partition, "--json", *extra]) == 0
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


@pytest.mark.parametrize("dv", [False, True], ids=["plain", "deletion-vectors"])
def test_compact_chain_table_writes_what_java_reads_by_chain(
        java_maintainer: JavaMaintainer, java_readers: JavaReaders, tmp_path: Path,
        dv: bool) -> None:
    java = java_maintainer
    reader = java_readers.get(CHAIN_RELEASE)
    warehouse = tmp_path / "wh"
    root = chain_table_for_java(warehouse, dv=dv)
    snapshot_path, delta_path = f"{root}$branch_snapshot", f"{root}$branch_delta"
    java.write(snapshot_path, _full("20250801", "abcdefghij", "1"))
    java.write(snapshot_path, _full("20250810", "abcdefghijkl", "1"))
    if dv:  # level 0 of a deletion-vector table is not read: compacted, as paimond's daemon
        java.compact(snapshot_path, full=True)
    java.write(delta_path, [["+I", "z", "1", "early", "20250701"]])  # before any anchor
    java.write(delta_path, [["+I", "a", "2", "a@0805", "20250805"]])  # before the anchor
    java.write(delta_path, [["+I", "a", "2", "a@0811", "20250811"],
                            ["+I", "m", "2", "m@0811", "20250811"],
                            ["-D", "b", "2", None, "20250811"],
                            ["+I", "c", "0", "older than the anchor's", "20250811"]])
    java.write(delta_path, [["+I", "d", "2", "d@0811", "20250811"]])
    if dv:  # deletion vectors in the delta branch: rows compaction replaced, read as deletes
        java.compact(delta_path, full=True)
        java.write(delta_path, [["-D", "d", "3", None, "20250811"],
                                ["+I", "e", "3", "e@0811", "20250811"]])
    java.write(delta_path, [["+I", "a", "3", "a@0812", "20250812"],
                            ["-D", "m", "3", None, "20250812"],
                            ["+I", "n", "3", "n@0812", "20250812"]])
    if dv:
        java.compact(delta_path, full=False)
        delta = open_table(open_storage(str(warehouse)), str(warehouse), "db.c$branch_delta")
        latest = delta.snapshots.latest()
        assert latest is not None and scan_snapshot(delta, latest).index_entries
    before = {dt: _rows_of(reader, str(root), dt)
              for dt in ("20250701", "20250811", "20250812")}
    assert before["20250811"] and before["20250812"] and before["20250701"]
    assert "b" not in _keys(before["20250811"])  # the delete crossed branches
    pristine = warehouse / "db.db" / "pristine"  # a copy never compacted
    shutil.copytree(root, pristine)

    first = _compact(warehouse, "dt=20250811")
    assert (first["action"], first["anchor"], first["delta_partitions"]) == (
        "append", "dt=20250810", ["dt=20250811"])
    second = _compact(warehouse, "dt=20250812")  # its anchor is now the partition just written
    assert (second["anchor"], second["delta_partitions"]) == ("dt=20250811", ["dt=20250812"])
    early = _compact(warehouse, "dt=20250701")
    assert (early["anchor"], early["delta_partitions"]) == (None, ["dt=20250701"])
    assert _compact(warehouse, "dt=20250811")["action"] == "skip"  # there now

    # Java 1.4 refuses to open a chain table with deletion vectors (its schema validation)
    releases = [reader] if dv else java_readers.every()
    for dt, rows in before.items():
        assert _rows_of(reader, str(root), dt) == rows, dt  # read from the snapshot branch now
        for release in releases:
            assert _rows_of(release, snapshot_path, dt) == rows, (release.release, dt)

    # Java writes more changes into a compacted partition; --overwrite rebuilds it from the
    # anchor and every delta: what Java's chain read gives of a copy never compacted
    change = [["+I", "x", "9", "x@later", "20250811"], ["-D", "a", "9", None, "20250811"]]
    for path in (delta_path, f"{pristine}$branch_delta"):
        java.write(path, change)
        if dv:
            java.compact(path, full=False)
    expected = _rows_of(reader, str(pristine), "20250811")
    assert "x" in _keys(expected) and "a" not in _keys(expected)
    assert _rows_of(reader, snapshot_path, "20250811") == before["20250811"]  # not rebuilt yet
    rebuilt = _compact(warehouse, "dt=20250811", "--overwrite")
    assert rebuilt["action"] == "overwrite" and rebuilt["snapshot_id"] is not None
    for release in releases:
        assert _rows_of(release, snapshot_path, "20250811") == expected, release.release
    assert _rows_of(reader, str(root), "20250812") == before["20250812"]


def _keys(rows: list[str]) -> set[str]:
    return {json.loads(r)[0] for r in rows}


def test_refusals_name_the_reason(java_maintainer: JavaMaintainer, tmp_path: Path,
                                  capsys: Any) -> None:
    warehouse = tmp_path / "wh"
    root = chain_table_for_java(warehouse, dv=False)
    java_maintainer.write(f"{root}$branch_delta", [["+I", "a", "1", "x", "20250811"]])
    wh = str(warehouse)
    assert main(["compact-chain-table", wh, "--table", "db.c", "--partition", "x=1"]) == 2
    assert "x is not a partition key of db.c" in capsys.readouterr().err
    assert main(["compact-chain-table", wh, "--table", "db.c",
                 "--partition", "dt=1;dt=2"]) == 2
    assert "one partition" in capsys.readouterr().err
    assert main(["compact-chain-table", wh, "--table", "db.c$branch_delta",
                 "--partition", "dt=20250811"]) == 2
    assert "is a branch" in capsys.readouterr().err
    assert main(["compact-chain-table", wh, "--table", "db.c", "--partition",
                 "dt=20250811", "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert (planned["action"], planned["anchor"], planned["rows_read"]) == ("append", None, 1)
    assert open_table(open_storage(wh), wh, "db.c$branch_snapshot").snapshots.latest() is None
    assert main(["rescale", wh, "--table", "db.c$branch_delta"]) == 1  # refused
    assert "ChainTableOverwriteCommitCallback" in capsys.readouterr().err


def test_each_group_chains_on_its_own(java_maintainer: JavaMaintainer,
                                      java_readers: JavaReaders, tmp_path: Path) -> None:
    """``chain-table.chain-partition-keys=dt``: the anchor of ``region=US`` is US's own nearest
    earlier snapshot partition, and only US's delta partitions after it are merged."""
    java, reader = java_maintainer, java_readers.get(CHAIN_RELEASE)
    warehouse = tmp_path / "wh"
    root = chain_table_for_java(warehouse, grouped=True)
    snapshot_path, delta_path = f"{root}$branch_snapshot", f"{root}$branch_delta"
    java.write(snapshot_path, [[*row, "US"] for row in _full("20250801", "abcd", "1")])
    java.write(snapshot_path, [[*row, "CN"] for row in _full("20250810", "abcd", "1")])
    java.write(delta_path, [["+I", "a", "2", "US 0805", "20250805", "US"],
                            ["+I", "b", "2", "CN 0805", "20250805", "CN"],
                            ["-D", "c", "2", None, "20250811", "US"],
                            ["+I", "e", "2", "US 0811", "20250811", "US"],
                            ["+I", "e", "2", "CN 0811", "20250811", "CN"]])

    def rows(path: str, region: str) -> list[str]:
        return sorted(r for r in reader.read_rows(path)
                      if json.loads(r)[3:] == ["20250811", region])

    before = {region: rows(str(root), region) for region in ("US", "CN")}
    assert "US 0805" in "".join(before["US"]) and "CN 0805" not in "".join(before["CN"])
    assert main(["compact-chain-table", str(warehouse), "--table", "db.c",
                 "--partition", "dt=20250811"]) == 2  # a partition names its region too
    for region, anchor, deltas in (
            ("US", "region=US/dt=20250801", ["region=US/dt=20250805", "region=US/dt=20250811"]),
            ("CN", "region=CN/dt=20250810", ["region=CN/dt=20250811"])):
        result = _compact(warehouse, f"region={region},dt=20250811")
        assert (result["anchor"], result["delta_partitions"]) == (anchor, deltas)
    for region, expected in before.items():
        assert rows(str(root), region) == expected
        assert rows(snapshot_path, region) == expected


def _partitions(warehouse: Path, branch: str) -> set[str]:
    table = open_table(open_storage(str(warehouse)), str(warehouse), f"db.c$branch_{branch}")
    latest = table.snapshots.latest()
    if latest is None:
        return set()
    schema = table.latest_schema()
    return {partition_text(schema, f.entry.partition) for f in scan_snapshot(table, latest).files}


def test_partitions_expire_by_segments_as_java_expires_them(
        java_maintainer: JavaMaintainer, java_readers: JavaReaders, tmp_path: Path) -> None:
    """Cutoff 2025-06-01: in CN the snapshot partitions before it are 0101, 0201 and 0301, so
    0301 anchors and the segments of 0101 and 0201 go, with the deltas before 0101; US has one
    snapshot partition before the cutoff and keeps everything."""
    days = (datetime.date.today() - datetime.date(2025, 6, 1)).days
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    root = chain_table_for_java(ours, grouped=True,
                                options={"partition.expiration-time": f"{days} d"})
    snapshot_path, delta_path = f"{root}$branch_snapshot", f"{root}$branch_delta"
    for dt in ("20250101", "20250201", "20250301", "20260101"):
        java_maintainer.write(snapshot_path, [[*row, "CN"] for row in _full(dt, "ab", "1")])
    java_maintainer.write(snapshot_path, [[*row, "US"] for row in _full("20250101", "ab", "1")])
    deltas = [("20241220", "CN"), ("20250110", "CN"), ("20250215", "CN"), ("20250305", "CN"),
              ("20260105", "CN"), ("20241220", "US"), ("20250110", "US")]
    java_maintainer.write(delta_path, [["+I", "c", "2", f"c@{dt}", dt, region]
                                       for dt, region in deltas])
    shutil.copytree(ours, theirs)
    their_root = theirs / "db.db" / "c"

    assert main(["expire-partitions", str(ours), "--table", "db.c$branch_snapshot"]) == 0
    java_maintainer.expire_partitions(f"{their_root}$branch_snapshot")

    for branch in ("snapshot", "delta"):
        assert _partitions(ours, branch) == _partitions(theirs, branch), branch
    assert _partitions(ours, "snapshot") == {
        "region=CN/dt=20250301", "region=CN/dt=20260101", "region=US/dt=20250101"}
    assert _partitions(ours, "delta") == {
        "region=CN/dt=20250305", "region=CN/dt=20260105", "region=US/dt=20241220",
        "region=US/dt=20250110"}
    reader = java_readers.get(CHAIN_RELEASE)
    assert sorted(reader.read_rows(root)) == sorted(reader.read_rows(their_root))
    # a second run finds nothing more
    assert main(["expire-partitions", str(ours), "--table", "db.c$branch_delta"]) == 0
    assert _partitions(ours, "snapshot") == _partitions(theirs, "snapshot")
