"""What the daemon's reading of an idle table looks at again with no new snapshot and no new
schema (``Watcher.due``, every ``RECHECK_MS``): a deletion-vector table's index files, one of
which may be lost, and nothing else for most tables; the whole reading again for a table that
could not be read and for rows growing more urgent as they wait (changelog to produce)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.dv_scenarios import SCENARIOS, Live
from support.streaming_tables import write_synthetic

from paimond.clock import SYSTEM_CLOCK
from paimond.daemon.tables import watch
from paimond.daemon.tables.watch import RECHECK_MS, Watcher
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import Table
from paimond.table.indexes.deletion_vectors import index_file_path
from paimond.table.scan.snapshot_scan import scan_snapshot

NOW_MS = 1_800_000_000_000


class CountedReads:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        real = watch.table_status

        def counted(*args: object, **kwargs: object) -> object:
            self.reads += 1
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(watch, "table_status", counted)


def _vectored(tmp_path: Path) -> Table:
    live = Live(SCENARIOS[0], str(tmp_path / "wh"))
    live.write(60)
    CompactJob(live.table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
    live.write(40)
    CompactJob(live.table, clock=SYSTEM_CLOCK, use_processes=False).run()
    return live.table


def test_a_table_without_vectors_is_not_read_again_for_the_clock_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = write_synthetic(tmp_path, {}, 3, partitions=2)
    reads, watcher = CountedReads(monkeypatch), Watcher()
    watcher.read(table, NOW_MS)
    assert watcher.recheck == frozenset() and reads.reads == 1
    for k in range(1, 6):
        assert not watcher.due(table, NOW_MS + k * RECHECK_MS)
    assert reads.reads == 1


def test_a_vector_table_is_read_again_when_an_index_file_is_lost(tmp_path: Path) -> None:
    table = _vectored(tmp_path)
    latest = table.snapshots.latest()
    assert latest is not None
    entries = scan_snapshot(table, latest).index_entries
    paths = {index_file_path(table, e.index_file) for e in entries}
    assert paths
    watcher = Watcher()
    watcher.read(table, NOW_MS)
    assert watcher.recheck == paths
    assert not watcher.due(table, NOW_MS + RECHECK_MS // 2)
    assert not watcher.due(table, NOW_MS + RECHECK_MS)  # every file there: the reading holds
    lost = sorted(paths)[0]
    Path(lost).unlink()
    assert not watcher.due(table, NOW_MS + RECHECK_MS + RECHECK_MS // 2)  # not looked for yet
    # a reading since (a new snapshot's) that found it there: its existence check trusts that
    watcher.memory.seen_ms[lost] = NOW_MS + RECHECK_MS
    assert watcher.due(table, NOW_MS + 2 * RECHECK_MS)
    assert lost not in watcher.memory.seen_ms  # so the next reading looks it up, and finds it lost
    watcher.read(table, NOW_MS + 2 * RECHECK_MS)
    assert watcher.last.needs["rebuild_dv"]


def test_changelog_waiting_and_unreadable_tables_are_read_again_whole(tmp_path: Path) -> None:
    table = write_synthetic(tmp_path / "lookup", {"changelog-producer": "lookup"}, 4,
                            partitions=3, delta_chunk=2)
    watcher = Watcher()
    watcher.read(table, NOW_MS)
    assert watcher.last.changelog_pending_millis is not None and watcher.recheck is None
    assert not watcher.due(table, NOW_MS + RECHECK_MS - 1)
    assert watcher.due(table, NOW_MS + RECHECK_MS)

    broken = write_synthetic(tmp_path / "broken", {}, 5, partitions=3)
    for manifest in (tmp_path / "broken" / "db.db" / "t" / "manifest").glob("manifest-*"):
        manifest.write_bytes(b"not avro")
    unreadable = Watcher()
    unreadable.read(broken, NOW_MS)
    assert unreadable.recheck is None
    assert unreadable.due(broken, NOW_MS + RECHECK_MS)
