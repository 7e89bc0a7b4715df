"""Planning compaction of pypaimon-written tables from metadata alone."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from pypaimon_tables import build_append_unaware, build_pk_deduplicate

from paimond.errors import UnsupportedError
from paimond.maintenance.compact_plan import plan_compaction
from paimond.table.catalog import open_table
from paimond.table.storage import open_storage

NOON = lambda: datetime.datetime(2026, 11, 22, 12, 0)  # noqa: E731


def test_plan_normal_and_full(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_pk_deduplicate(warehouse)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    latest = table.snapshots.latest()
    assert latest is not None

    full = plan_compaction(table, full=True, now=NOON)
    assert full.base_snapshot_id == latest.id and full.tasks
    assert full.buckets_seen == len(full.tasks)
    for task in full.tasks:
        assert task.output_level == task.max_level == 5
        assert task.trigger == "full" and task.drop_deletes
        assert {e.file.level for e in task.inputs} == {0}

    normal = plan_compaction(table, now=NOON)
    # 6 commits -> up to 6 level-0 runs per bucket; the trigger is 5.
    for task in normal.tasks:
        assert len(task.inputs) >= 2 and task.output_level > 0
        assert task.trigger in ("size_amp", "size_ratio", "run_count")
    assert "bucket" in normal.describe()

    one = plan_compaction(table, full=True, now=NOON,
                          partitions={"tag": full.tasks[0].partition_text.split("tag=")[1]})
    assert 0 < len(one.tasks) < len(full.tasks)


def test_append_tables_are_refused(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    spec = build_append_unaware(warehouse)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    with pytest.raises(UnsupportedError, match="append tables"):
        plan_compaction(table, now=NOON)
