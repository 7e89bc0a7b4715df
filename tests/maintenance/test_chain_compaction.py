"""compact-chain-table on a chain table pypaimon wrote into its branches: pypaimon reads the
compacted partition in the snapshot branch as the model of Paimon's chain read gives it, in
one sorted run per bucket at the max level (Java's own chain reads:
tests/interop/test_java_chain_table.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from support.chain_tables import build_chain_table, chain_model, write_partition
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for

from paimond.cli.main import main
from paimond.table.catalog import open_table
from paimond.table.layout import partition_text
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage


def _partition(warehouse: str, dt: str) -> dict[str, tuple[str, str]]:
    rows = read_rows(warehouse, "db.c$branch_snapshot").to_pylist()
    return {r["t1"]: (r["t2"], r["v"]) for r in rows if r["dt"] == dt}


def _compact(wh: str, dt: str, capsys: Any, *extra: str) -> dict[str, Any]:
    assert main(["compact-chain-table", wh, "--table", "db.c", "--partition", f"dt={dt}",
                 "--json", *extra]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_partitions_are_written_as_the_chain_reads_them(tmp_path: Path, capsys: Any) -> None:
    wh = str(tmp_path / "wh")
    build_chain_table(wh)
    snapshot = open_table(open_storage(wh), wh, "db.c$branch_snapshot")
    before = snapshot.snapshots.latest_id()

    planned = _compact(wh, "20250811", capsys, "--dry-run")
    assert (planned["anchor"], planned["delta_partitions"], planned["rows_read"]) == (
        "dt=20250810", ["dt=20250811"], 8 + 5)
    assert snapshot.snapshots.latest_id() == before  # a dry run writes nothing

    done = _compact(wh, "20250811", capsys)
    assert (done["action"], done["snapshot_id"]) == ("append", before + 1)
    expected = chain_model("20250810", ["20250811"], "20250811")
    assert _partition(wh, "20250811") == expected
    assert expected["a"] == ("3", "a@0811 again") and expected["c"] == ("1", "c@0810")
    assert done["rows_written"] == len(expected)

    latest = snapshot.snapshots.latest()
    assert latest is not None and latest.commit_kind == "APPEND"
    written = [f.entry for f in scan_snapshot(snapshot, latest).files
               if f.entry.partition != b"" and f.entry.file.level == 5]
    assert {e.bucket for e in written} == {0, 1} and all(e.total_buckets == 2 for e in written)

    # the next partition's anchor is the one just written; 20250805 lies before it
    assert _compact(wh, "20250812", capsys)["anchor"] == "dt=20250811"
    assert _partition(wh, "20250812") == expected | {"a": ("4", "a@0812"), "n": ("2", "n@0812")}
    assert _compact(wh, "20250811", capsys)["action"] == "skip"  # the branch has it now


def test_overwrite_rebuilds_a_partition_the_snapshot_branch_has(tmp_path: Path,
                                                                capsys: Any) -> None:
    wh = str(tmp_path / "wh")
    build_chain_table(wh)
    assert _compact(wh, "20250811", capsys)["action"] == "append"
    rebuilt = _compact(wh, "20250811", capsys, "--overwrite")
    assert rebuilt["action"] == "overwrite"
    snapshot = open_table(open_storage(wh), wh, "db.c$branch_snapshot")
    latest = snapshot.snapshots.latest()
    assert latest is not None and latest.commit_kind == "OVERWRITE"
    assert _partition(wh, "20250811") == chain_model("20250810", ["20250811"], "20250811")
    live = [f.entry for f in scan_snapshot(snapshot, latest).files]
    assert len({e.file.file_name for e in live}) == len(live)
    schema = snapshot.latest_schema()
    rebuilt_files = [e for e in live if partition_text(schema, e.partition) == "dt=20250811"]
    assert {e.file.level for e in rebuilt_files} == {5}  # the old run was replaced
    assert sum(e.file.row_count for e in rebuilt_files) == rebuilt["rows_written"]


def test_a_partition_deletion_vector_readers_do_not_see_yet_is_refused(
        tmp_path: Path, capsys: Any) -> None:
    """With deletion vectors, level 0 is not read: the delta branch is compacted so its
    partition shows, and the snapshot branch got the partition in level 0 only."""
    wh = str(tmp_path / "wh")
    build_chain_table(wh, {"deletion-vectors.enabled": "true"})
    assert main(["compact", wh, "--table", "db.c$branch_delta", "--full"]) == 0
    write_partition(catalog_for(wh), "db.c$branch_snapshot", "20250811", [("z", "9", "new")])
    snapshot = open_table(open_storage(wh), wh, "db.c$branch_snapshot")
    before = snapshot.snapshots.latest_id()
    capsys.readouterr()
    for extra in ([], ["--overwrite"]):
        assert main(["compact-chain-table", wh, "--table", "db.c", "--partition",
                     "dt=20250811", *extra]) == 1
        assert "level-0 files of partition dt=20250811" in capsys.readouterr().err
    assert snapshot.snapshots.latest_id() == before
    assert main(["compact", wh, "--table", "db.c$branch_snapshot", "--full"]) == 0
    capsys.readouterr()
    assert _compact(wh, "20250811", capsys)["action"] == "skip"  # visible now
    assert _partition(wh, "20250811") == {"z": ("9", "new")}


def test_the_daemon_expires_chain_partitions_from_every_branchs_job(tmp_path: Path) -> None:
    """Cutoff between 0810 and 0811: 0801 and the delta before 0810 (0805) expire, 0810
    anchors. The daemon runs each branch's job, two at a time, as Java's writers of each
    branch would: none fails, whichever drops first."""
    import datetime

    from prometheus_client import CollectorRegistry

    from paimond.config.settings import load_settings
    from paimond.daemon.metrics import Metrics
    from paimond.daemon.service import Daemon
    from paimond.maintenance.jobs import ROUTINE

    days = (datetime.date.today() - datetime.date(2025, 8, 10)).days
    wh = str(tmp_path / "wh")
    build_chain_table(wh, {"partition.expiration-time": f"{days - 1} d"})
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": wh,
                                        "PAIMOND_LIMITS_CONCURRENCY": "2"}, jobs=ROUTINE)
    runs = Daemon(settings, Metrics(CollectorRegistry())).run_once()
    assert sorted(r.table for r in runs) == ["db.c", "db.c$branch_delta", "db.c$branch_snapshot"]
    assert all(r.error is None for r in runs), [(r.table, r.error) for r in runs]

    def partitions(branch: str) -> set[str]:
        table = open_table(open_storage(wh), wh, f"db.c$branch_{branch}")
        latest = table.snapshots.latest()
        assert latest is not None
        schema = table.latest_schema()
        return {partition_text(schema, f.entry.partition)
                for f in scan_snapshot(table, latest).files}

    assert partitions("snapshot") == {"dt=20250810"}
    assert partitions("delta") == {"dt=20250811", "dt=20250812"}
