"""Planning compaction of pypaimon-written tables from metadata alone."""

from __future__ import annotations

import datetime
from pathlib import Path

import pyarrow as pa
from support.pypaimon_tables import (
    TableWriter,
    build_append_unaware,
    build_pk_deduplicate,
    catalog_for,
    not_null,
)

from paimond.clock import Clock
from paimond.lsm.picker import PickerState
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.plan import plan_compaction
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

NOON = datetime.datetime(2026, 11, 22, 12, 0)
CLOCK = Clock(fixed_ms=int(NOON.timestamp() * 1000))  # its local time is NOON


def test_plan_normal_and_full(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_pk_deduplicate(warehouse)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    latest = table.snapshots.latest()
    assert latest is not None

    full = plan_compaction(table, full=True, moment=NOON)
    assert full.base_snapshot_id == latest.id and full.tasks
    assert full.buckets_seen == len(full.tasks)
    for task in full.tasks:
        assert task.output_level == task.max_level == 5
        assert task.trigger == "full" and task.drop_deletes
        assert {e.file.level for e in task.inputs} == {0}

    normal = plan_compaction(table, moment=NOON)
    # 6 commits -> up to 6 level-0 runs per bucket; the trigger is 5.
    for task in normal.tasks:
        assert len(task.inputs) >= 2 and task.output_level > 0
        assert task.trigger in ("size_amp", "size_ratio", "run_count")
    assert normal.tasks  # six level-0 runs beat the trigger of 5 in some bucket
    lines = normal.describe().splitlines()
    assert lines[0] == (f"{spec.name}: {len(normal.tasks)} of {normal.buckets_seen} buckets "
                        f"to compact (base snapshot {latest.id})")
    assert lines[1:] == [f"  {task.describe()}" for task in normal.tasks]
    assert all(f"bucket {t.bucket}: {len(t.inputs)} files" in t.describe() for t in normal.tasks)

    one = plan_compaction(table, full=True, moment=NOON,
                          partitions={"tag": full.tasks[0].partition_text.split("tag=")[1]})
    assert 0 < len(one.tasks) < len(full.tasks)


def test_append_tables_are_planned_by_the_append_planner(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_append_unaware(warehouse)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    plan = plan_compaction(table, moment=NOON)
    assert plan.tasks and all(t.append and t.output_level == 0 for t in plan.tasks)


def test_gentle_lookup_mode_forces_level0_up_every_max_interval_runs(tmp_path: Path) -> None:
    """Java ``ForceUpLevel0Compaction`` in gentle mode: when universal picks nothing, only
    every ``lookup-compact.max-interval``-th attempt pushes level 0 up; the count lives in
    the picker states a long-lived caller hands each ``CompactJob``."""
    warehouse = str(tmp_path / "wh")
    writer = TableWriter(catalog_for(warehouse), "db.gentle",
                     pa.schema([not_null("id", pa.int32()), ("v", pa.string())]),
                     primary_keys=("id",),
                     options={"bucket": "1", "deletion-vectors.enabled": "true",
                              "lookup-compact": "gentle", "lookup-compact.max-interval": "3",
                              "num-sorted-run.compaction-trigger": "2"})
    writer.commit([{"id": i, "v": f"v{i}"} for i in range(10)])  # one level-0 run: universal waits
    table = open_table(open_storage(warehouse), warehouse, "db.gentle")
    states: dict[tuple[bytes, int], PickerState] = {}

    def run() -> int | None:
        summary = CompactJob(table, use_processes=False, clock=CLOCK, picker_states=states).run()
        assert not summary.failures
        return summary.snapshot.id if summary.snapshot is not None else None

    # Without shared states every run is a first attempt: level 0 never moves.
    assert [CompactJob(table, use_processes=False, clock=CLOCK).run().snapshot
            for _ in range(4)] == [None] * 4
    assert [run(), run()] == [None, None]
    assert [s.force_l0_attempts for s in states.values()] == [2]
    forced = run()
    assert forced is not None and table.snapshots.latest_id() == forced
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "COMPACT"
    assert [s.force_l0_attempts for s in states.values()] == [0]
    plan = plan_compaction(table, moment=NOON)
    assert plan.buckets_seen == 1 and not plan.tasks  # nothing left in level 0
