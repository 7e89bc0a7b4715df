"""A bucket merged in passes through spill files (``max_runs``: the memory budget lets it read
only so many sorted runs at once), or with some of its runs read beforehand into spill files
(``reading_bytes``: their file readers do not fit the budget together), writes the same rows,
sequence numbers, row kinds and changelog as the one merge of every run, for every merge
engine; the spill files are gone afterwards. Which runs are spilled: ``plan_run_reading``."""

from __future__ import annotations

import datetime
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.compaction_files import entry_rows
from support.pypaimon_tables import (
    TableWriter,
    build_pk_aggregation,
    build_pk_deduplicate,
    build_pk_deletion_vectors,
    build_pk_first_row,
    build_pk_partial_update,
    catalog_for,
    seeded_rng,
)

from paimond.lsm.merge.spill import RunReading, SpillDirectory, plan_run_reading
from paimond.lsm.rewrite import execute_compaction
from paimond.lsm.task import CompactResult, CompactTask
from paimond.maintenance.compact.memory import reader_bytes
from paimond.maintenance.compact.plan import plan_compaction
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

MOMENT = datetime.datetime(2026, 12, 1, 12)


def _lookup_changelog(warehouse: str) -> Any:
    """Deduplicate with ``changelog-producer = lookup``: 8 overlapping commits, one bucket."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    writer = TableWriter(catalog_for(warehouse), "db.lookup", schema, primary_keys=("id",),
                         options={"bucket": "1", "changelog-producer": "lookup"})
    for commit in range(8):
        rng = seeded_rng(f"lookup{commit}")
        writer.commit([{"id": i, "v": f"{commit}-{rng.randrange(1000)}"}
                       for i in sorted(rng.sample(range(300), 120))])
    return type("Spec", (), {"name": "db.lookup"})


BUILDERS: dict[str, Callable[[str], Any]] = {
    "deduplicate": build_pk_deduplicate, "partial-update": build_pk_partial_update,
    "aggregation": build_pk_aggregation, "first-row": build_pk_first_row,
    "deletion vectors": build_pk_deletion_vectors, "lookup changelog": _lookup_changelog,
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    root = tmp_path_factory.mktemp("spill")
    tables = {}
    for kind, build in BUILDERS.items():
        warehouse = root / kind.replace(" ", "_")
        tables[kind] = (warehouse, build(str(warehouse)).name)
    return tables


# how a merge is bounded: execute_compaction's arguments for a task
BOUNDS: dict[str, Callable[[CompactTask], dict[str, int]]] = {
    "two runs at once": lambda task: {"max_runs": 2},
    "half the runs' readers": lambda task: {"reading_bytes": sum(reader_bytes(task)) // 2},
}


def _compact(warehouse: Path, name: str, copy: Path,
             bound: Callable[[CompactTask], dict[str, int]] | None
             ) -> list[tuple[CompactResult, pa.Table, pa.Table]]:
    shutil.copytree(warehouse, copy)
    storage = open_storage(str(copy))
    table = open_table(storage, str(copy), name)
    tasks = plan_compaction(table, full=True, partitions=None, moment=MOMENT).tasks
    assert tasks
    done = []
    for task in sorted(tasks, key=lambda t: (t.partition_text or "", t.bucket)):
        result = execute_compaction(task, storage, now_millis=lambda: 0, batch_rows=16,
                                    **(bound(task) if bound else {}))
        done.append((result, entry_rows(storage, task, result.added),
                     entry_rows(storage, task, result.changelog)))
    return done


@pytest.mark.parametrize("bound", sorted(BOUNDS))
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_merge_in_passes_writes_what_one_merge_writes(
        kind: str, bound: str, built: dict[str, tuple[Path, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse, name = built[kind]
    spills = tmp_path / "spills"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    spilled: list[int] = []
    real_spill = SpillDirectory.spill

    def counted_spill(self: SpillDirectory, tables: Any) -> Any:
        spilled.append(1)
        return real_spill(self, tables)

    monkeypatch.setattr(SpillDirectory, "spill", counted_spill)
    whole = _compact(warehouse, name, tmp_path / "whole", None)
    assert not spilled
    passes = _compact(warehouse, name, tmp_path / "passes", BOUNDS[bound])
    assert spilled
    runs = [len({e.file.level for e in r.task.inputs if e.file.level > 0})
            + sum(1 for e in r.task.inputs if e.file.level == 0) for r, _, _ in passes]
    assert max(runs) > 4  # two runs at once: more than two passes (3+ runs, spills, spills)
    assert len(whole) == len(passes)
    for (one, rows, changelog), (other, rows_p, changelog_p) in zip(whole, passes, strict=True):
        assert (one.rows_read, one.rows_written) == (other.rows_read, other.rows_written)
        assert rows_p.equals(rows)
        assert changelog_p.equals(changelog)
    if kind == "lookup changelog":
        assert sum(c.num_rows for _, _, c in passes) > 0
    assert not list(spills.iterdir())  # every spill directory deleted


def test_without_a_bound_or_within_it_no_run_is_spilled() -> None:
    assert plan_run_reading([5, 9, 7], None, None) == RunReading()
    assert plan_run_reading([5, 9, 7], 21, 3) == RunReading()
    assert not RunReading().spills


def test_the_runs_with_the_largest_readers_are_spilled_alone_until_the_rest_fit() -> None:
    reading = plan_run_reading([5, 9, 7, 9, 1], 14, None)
    assert reading == RunReading(((1,), (3,)))  # 31 -> 22 -> 13: both 9s, the first first
    assert plan_run_reading([5, 9, 7, 9, 1], 12, None) == RunReading(((1,), (2,), (3,)))
    assert reading.spills
    assert plan_run_reading([50, 60], 10, None) == RunReading(((0,), (1,)))


def test_more_runs_than_a_merge_reads_are_all_spilled_in_groups_that_fit() -> None:
    assert plan_run_reading([1] * 5, None, 2) == RunReading(((0, 1), (2, 3), (4,)))
    # a group closes at max_runs or where the next reader would pass the limit
    assert plan_run_reading([4, 4, 4, 9, 1, 1], 8, 3) == RunReading(
        ((0, 1), (2,), (3,), (4, 5)))
