"""`rebuild-dv`: vectors computed from the levels, checked through pypaimon's DV reads.

The table starts without deletion vectors and `compaction.force-up-level-0`, so compaction
leaves overlapping versions (and -U/-D rows) in levels 4 and 5 and nothing at level 0. Once
deletion vectors are enabled (a pypaimon schema change), pypaimon reads every level >= 1 file
without merging, so its read is wrong until `rebuild-dv` commits the vectors."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.dv_layered import enable_vectors, layered
from support.dv_scenarios import SCENARIOS, Live
from support.pypaimon_oracle import read_rows

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK
from paimond.errors import UnsupportedError
from paimond.maintenance.regenerate.rebuild_dv import RebuildDvJob
from paimond.table.scan.snapshot_scan import scan_snapshot


def test_rebuild_makes_pypaimon_read_the_table_right(tmp_path: Path) -> None:
    live = layered(tmp_path)
    merged = read_rows(live.warehouse, live.name)
    assert merged.equals(live.expected())
    enable_vectors(live)
    unvectored = read_rows(live.warehouse, live.name)
    assert not unvectored.equals(live.expected())
    before_id = live.table.snapshots.latest_id()

    preview = RebuildDvJob(live.table, clock=SYSTEM_CLOCK, dry_run=True).run()
    assert preview.changed and preview.snapshot is None
    assert "would be committed" in preview.describe()
    assert live.table.snapshots.latest_id() == before_id

    summary = RebuildDvJob(live.table, clock=SYSTEM_CLOCK).run()
    assert summary.snapshot is not None and summary.snapshot.commit_kind == "COMPACT"
    assert read_rows(live.warehouse, live.name).equals(live.expected())
    # Idempotent: the second run commits nothing.
    again = RebuildDvJob(live.table, clock=SYSTEM_CLOCK).run()
    assert not again.changed and again.snapshot is None
    assert live.table.snapshots.latest_id() == summary.snapshot.id
    assert "already right" in again.describe()
    # The snapshot before it still reads as it did (no vectors: every level-1+ row).
    assert read_rows(live.warehouse, live.name, snapshot_id=before_id).equals(unvectored)


def test_vectors_maintained_by_compaction_need_no_rebuild(tmp_path: Path) -> None:
    live = Live(SCENARIOS[0], str(tmp_path / "wh"))
    live.write(60)
    live.compact(full=True)
    for _ in range(3):
        live.write(30)
        live.compact()
    summary = RebuildDvJob(live.table, clock=SYSTEM_CLOCK).run()
    assert not summary.changed, summary.describe()
    # Discarding them loses only what the vectors alone recorded: deleted keys come back.
    rebuilt = RebuildDvJob(live.table, clock=SYSTEM_CLOCK, discard_existing=True, dry_run=True).run()
    assert sum(b.rows_after for b in rebuilt.buckets) <= sum(b.rows_before
                                                             for b in rebuilt.buckets)


def test_lost_vector_files_are_rebuilt_with_discard_existing(tmp_path: Path) -> None:
    live = layered(tmp_path)
    enable_vectors(live)
    RebuildDvJob(live.table, clock=SYSTEM_CLOCK).run()
    latest = live.table.snapshots.latest()
    assert latest is not None
    for entry in scan_snapshot(live.table, latest).index_entries:
        Path(live.table.file_path("index", entry.index_file.file_name)).unlink()
    with pytest.raises(Exception, match="index-"):
        RebuildDvJob(live.table, clock=SYSTEM_CLOCK).run()
    summary = RebuildDvJob(live.table, clock=SYSTEM_CLOCK, discard_existing=True).run()
    assert summary.snapshot is not None
    assert read_rows(live.warehouse, live.name).equals(live.expected())


def test_cli_rebuild_dv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    live = layered(tmp_path)
    assert main(["rebuild-dv", live.warehouse, "--table", live.name]) == 1
    assert "deletion-vectors.enabled" in capsys.readouterr().err
    enable_vectors(live)
    assert main(["rebuild-dv", live.warehouse, "--table", live.name, "--dry-run"]) == 0
    assert "would be committed" in capsys.readouterr().out
    assert main(["rebuild-dv", live.warehouse, "--table", live.name,
                 "--partition", "dt=a"]) == 0
    out = capsys.readouterr().out
    assert "committed as snapshot" in out and "dt=b" not in out
    assert main(["rebuild-dv", live.warehouse, "--table", live.name]) == 0
    assert "committed as snapshot" in capsys.readouterr().out
    assert main(["rebuild-dv", live.warehouse, "--table", live.name]) == 0
    assert "already right" in capsys.readouterr().out
    assert read_rows(live.warehouse, live.name).equals(live.expected())


def test_tables_without_vectors_are_refused(tmp_path: Path) -> None:
    live = layered(tmp_path)
    with pytest.raises(UnsupportedError, match="deletion-vectors.enabled"):
        RebuildDvJob(live.table, clock=SYSTEM_CLOCK).run()
