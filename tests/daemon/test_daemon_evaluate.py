"""The daemon's decisions from plain figures: due jobs, quarantine and backoff, health and
urgency (daemon/tables/evaluate.py; no storage, no clock)."""

from __future__ import annotations

from collections import Counter

from paimond.daemon.tables.evaluate import (
    Backoff,
    BackoffPolicy,
    Schedule,
    Standing,
    backoff,
    decide,
    health,
)
from paimond.table.status.report import BucketStatus, LevelStatus, ManifestStatus, TableStatus

SCHEDULES = {"compact": Schedule(True, 60), "expire": Schedule(True, 300),
             "merge_manifests": Schedule(False, 600), "remove_orphans": Schedule(True, 86400)}


def test_a_new_table_is_due_for_every_enabled_job() -> None:
    decision = decide(Standing(), latest_snapshot_id=3, now=1000.0, schedules=SCHEDULES)
    assert decision.jobs == ("compact", "expire", "remove_orphans")
    assert decision.new_snapshot and not decision.cleared


def test_jobs_come_due_by_interval_and_compaction_by_a_moved_table() -> None:
    ran = {"compact": 1000.0, "expire": 1000.0, "remove_orphans": 1000.0}
    quiet = Standing(last_snapshot_id=5, compacted_snapshot_id=5, last_run=ran)
    assert decide(quiet, 5, 1059.0, SCHEDULES).jobs == ()
    assert decide(quiet, 5, 1060.0, SCHEDULES).jobs == ("compact",)
    assert decide(quiet, 5, 1300.0, SCHEDULES).jobs == ("compact", "expire")
    moved = decide(quiet, 6, 1001.0, SCHEDULES)
    assert moved.jobs == ("compact",) and moved.new_snapshot


def test_backing_off_and_quarantined_tables_get_nothing_until_a_new_snapshot() -> None:
    waiting = Standing(last_snapshot_id=5, failures=1, next_attempt_at=2000.0)
    assert decide(waiting, 5, 1999.0, SCHEDULES).jobs == ()
    assert decide(waiting, 5, 2000.0, SCHEDULES).jobs == ("compact", "expire", "remove_orphans")
    quarantined = Standing(last_snapshot_id=5, failures=5, next_attempt_at=9e9, quarantined=True)
    held = decide(quarantined, 5, 1e10, SCHEDULES)
    assert held.jobs == () and not held.cleared
    released = decide(quarantined, 6, 1000.0, SCHEDULES)
    assert released.cleared and released.jobs == ("compact", "expire", "remove_orphans")


def test_backoff_doubles_up_to_its_cap_and_quarantines_at_the_threshold() -> None:
    policy = BackoffPolicy(base_s=30, max_s=100, quarantine_after=3)
    assert [backoff(n, policy) for n in (1, 2, 3, 4)] == [
        Backoff(30, False), Backoff(60, False), Backoff(100, True), Backoff(100, True)]
    assert backoff(1, BackoffPolicy(0, 3600, 5)) == Backoff(0, False)


def _bucket(bucket: int, runs: int, level0: int, size: int, dv_rows: int = 0) -> BucketStatus:
    levels = (LevelStatus(0, level0, size // 2, 10), LevelStatus(5, 1, size - size // 2, 10))
    return BucketStatus("p=1", bucket, levels, runs, 0, dv_rows)


def test_health_figures_and_urgency() -> None:
    status = TableStatus("db.t", "/wh/db.db/t", primary_keys=("k",), compaction_trigger=5,
                         stop_trigger=10,
                         snapshot_count=7, buckets=(_bucket(0, 8, 7, 1000, dv_rows=3),
                                                    _bucket(1, 2, 1, 500)),
                         manifests=ManifestStatus(2, 0, 3, 0, Counter()))
    figures = health(status)
    assert figures is not None
    assert figures.gauges == {"level0_files": 8, "max_sorted_runs": 8, "compaction_trigger": 5,
                              "stop_trigger": 10, "compaction_debt_bytes": 1000, "snapshots": 7,
                              "manifest_files": 5, "dv_cardinality": 3,
                              "deleted_row_ratio": 3 / 40, "postpone_rows": 0}
    assert figures.urgency == 8 / 10 + 1000 / 1e12
    calmer = health(TableStatus("db.u", "/wh/db.db/u", primary_keys=("k",), compaction_trigger=5,
                                stop_trigger=10,
                                buckets=(_bucket(0, 3, 2, 10**9),)))
    assert calmer is not None and calmer.urgency < figures.urgency
    assert calmer.gauges["compaction_debt_bytes"] == 0 and calmer.gauges["manifest_files"] == 0


def test_an_unreadable_status_has_no_health() -> None:
    assert health(TableStatus("db.t", "/wh", error="CorruptFileError: x")) is None
    empty = health(TableStatus("db.t", "/wh"))
    assert empty is not None and empty.urgency == 0 and empty.gauges["max_sorted_runs"] == 0


def test_append_urgency_counts_small_files_and_deleted_rows() -> None:
    """Append tables: a partition's small files and a bucket's deleted share, not its runs
    (every append file is a level-0 run), make the urgency."""
    def append(small: int, files: int, rows: int, deleted: int = 0) -> BucketStatus:
        return BucketStatus("p=1", 0, (LevelStatus(0, files, 10, rows),), files, 0, deleted,
                            small)

    def urgency(*buckets: BucketStatus, primary_keys: tuple[str, ...] = ()) -> float:
        figures = health(TableStatus("db.a", "/wh", primary_keys=primary_keys, stop_trigger=10,
                                     buckets=buckets))
        assert figures is not None
        return figures.urgency

    assert urgency(append(0, 400, 10**6)) == 0  # many large files: nothing to compact
    assert urgency(append(50, 60, 100), append(3, 3, 100)) == 1.0 == urgency(
        _bucket(0, 10, 10, 0), primary_keys=("k",))  # as a primary-key bucket at its stop
    assert urgency(append(0, 5, 100, deleted=50)) == 1.0
    assert urgency(append(10, 12, 100, deleted=10)) == 10 / 50 + 0.1 / 0.5
    figures = health(TableStatus("db.a", "/wh", buckets=(append(1, 2, 300, deleted=30),
                                                         append(0, 1, 100))))
    assert figures is not None and figures.gauges["deleted_row_ratio"] == 30 / 400
