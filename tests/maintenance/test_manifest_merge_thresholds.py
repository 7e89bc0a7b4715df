"""merge-manifests forced (the CLI, Java's compact_manifest) or by the table's own thresholds
(the daemon's default): a table with a few small manifests gets no COMPACT
snapshot from the daemon's job, only from a forced merge or once manifest.merge-min-count is
reached."""

from __future__ import annotations

from pathlib import Path

from support.pk_table_writes import write_pk_table

from paimond.clock import Clock
from paimond.config.jobs import parse_jobs
from paimond.maintenance.jobs import JOBS, ROUTINE, JobContext
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage


def _run(warehouse: Path, **settings: object) -> int | None:
    storage = open_storage(str(warehouse))
    table = open_table(storage, storage.root, "db.t")
    spec = JOBS["merge_manifests"]
    spec.run(table, spec.settings(**settings), JobContext(Clock(fixed_ms=1_700_000_000_000)))
    return table.snapshots.latest_id()


def test_unforced_merges_by_merge_min_count(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    write_pk_table(str(warehouse), 3)
    assert _run(warehouse, forced=False) == 3  # a few small manifests, under the min count (30)
    assert _run(warehouse) == 4  # forced, as the CLI does: one COMPACT snapshot
    write_pk_table(str(warehouse), 2)  # writers go on: still few manifests
    assert _run(warehouse, forced=False) == 6


def test_the_daemon_merges_by_thresholds_unless_asked(tmp_path: Path) -> None:
    daemon = parse_jobs({}, ROUTINE)
    assert daemon.by_name("merge_manifests").settings.forced is False
    forced = parse_jobs({"merge_manifests": {"forced": True}}, ROUTINE)
    assert forced.by_name("merge_manifests").settings.forced is True
    write_pk_table(str(tmp_path / "wh"), 3)
    storage = open_storage(str(tmp_path / "wh"))
    table = open_table(storage, storage.root, "db.t")
    (table_dir,) = [p for p in (tmp_path / "wh").rglob("t") if p.is_dir()]
    (table_dir / "schema" / "schema-0").write_text(  # a table that merges at 2 manifests
        (table_dir / "schema" / "schema-0").read_text().replace(
            '"write-only"', '"manifest.merge-min-count" : "2",\n    "write-only"'))
    assert "manifest.merge-min-count" in table.latest_schema().options
    assert _run(tmp_path / "wh", forced=False) == 4
