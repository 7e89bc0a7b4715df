"""Snapshot listing and the EARLIEST/LATEST hints, handled as Paimon handles them."""

from __future__ import annotations

from pathlib import Path

import pytest

from paimond.errors import CorruptFileError, MissingFileError
from paimond.format.meta.snapshot import Snapshot, encode_snapshot
from paimond.table.snapshots import Snapshots
from paimond.table.storage.interface import open_storage


def _snapshot(snapshot_id: int) -> Snapshot:
    return Snapshot(id=snapshot_id, schema_id=0, base_manifest_list=f"b-{snapshot_id}",
                    delta_manifest_list=f"d-{snapshot_id}", commit_user="u",
                    commit_identifier=2**63 - 1, commit_kind="APPEND", time_millis=snapshot_id)


def _table(tmp_path: Path, ids: list[int], **hints: str) -> Snapshots:
    directory = tmp_path / "t" / "snapshot"
    directory.mkdir(parents=True)
    for snapshot_id in ids:
        (directory / f"snapshot-{snapshot_id}").write_bytes(encode_snapshot(_snapshot(snapshot_id)))
    for name, text in hints.items():
        (directory / name).write_text(text)
    (directory / ".snapshot-99.0b1c.tmp").write_text("half written")
    return Snapshots(open_storage(str(tmp_path)), str(tmp_path / "t"))


def test_listing_ignores_hints_and_temp_files(tmp_path: Path) -> None:
    snapshots = _table(tmp_path, [3, 1, 2], LATEST="3", EARLIEST="1")
    assert snapshots.list_ids() == [1, 2, 3]


@pytest.mark.parametrize("hint, expected", [
    (None, 4),      # no hint: listing
    ("4", 4),       # exact hint
    ("2", 4),       # stale hint (snapshot-3 exists): listing
    ("9", 4),       # hint past the newest snapshot: listing, never the missing id
    ("-1", 4),
    ("garbage", 4),
    ("", 4),
])
def test_latest(tmp_path: Path, hint: str | None, expected: int) -> None:
    hints = {} if hint is None else {"LATEST": hint}
    snapshots = _table(tmp_path, [2, 3, 4], **hints)
    assert snapshots.latest_id() == expected
    latest = snapshots.latest()
    assert latest is not None and latest.id == expected


def test_latest_hint_is_trusted_when_it_is_the_newest(tmp_path: Path) -> None:
    # Java reads the hint and only checks that hint+1 does not exist: no listing needed.
    snapshots = _table(tmp_path, [1, 2], LATEST="2")
    assert snapshots.latest_id() == 2


@pytest.mark.parametrize("hint, expected", [
    (None, 2),
    ("3", 3),       # after expiration wrote EARLIEST
    ("1", 2),       # hint names an expired (deleted) snapshot: listing
    ("x", 2),
])
def test_earliest(tmp_path: Path, hint: str | None, expected: int) -> None:
    hints = {} if hint is None else {"EARLIEST": hint}
    assert _table(tmp_path, [2, 3, 4], **hints).earliest_id() == expected


def test_empty_table_has_no_snapshots(tmp_path: Path) -> None:
    snapshots = Snapshots(open_storage(str(tmp_path)), str(tmp_path / "none"))
    assert snapshots.list_ids() == []
    assert snapshots.latest_id() is None
    assert snapshots.earliest_id() is None
    assert snapshots.latest() is None


def test_invalid_snapshot_json_names_the_file(tmp_path: Path) -> None:
    snapshots = _table(tmp_path, [1])
    (tmp_path / "t" / "snapshot" / "snapshot-2").write_text('{"id": 2, "schemaId"')
    with pytest.raises(CorruptFileError, match=r"snapshot/snapshot-2: invalid snapshot JSON"):
        snapshots.load(2)


def test_snapshot_with_wrong_id_is_corrupt(tmp_path: Path) -> None:
    snapshots = _table(tmp_path, [1])
    (tmp_path / "t" / "snapshot" / "snapshot-5").write_bytes(encode_snapshot(_snapshot(1)))
    with pytest.raises(CorruptFileError, match="holds snapshot id 1, expected 5"):
        snapshots.load(5)


def test_missing_snapshot_names_the_file(tmp_path: Path) -> None:
    snapshots = _table(tmp_path, [1])
    with pytest.raises(MissingFileError, match=r"snapshot/snapshot-7"):
        snapshots.load(7)
