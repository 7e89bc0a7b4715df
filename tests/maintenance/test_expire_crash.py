"""Crash safety of snapshot expiration (DESIGN.md, Invariants): ``paimond expire-snapshots``
killed at every ``expire.*`` crash point, at every pass of it (long loops sampled, always with
their first and last pass), never leaves a snapshot a reader can find (from EARLIEST, LATEST or
by listing ``snapshot/``) that does not read exactly as before, and a rerun ends in exactly the
state an uninterrupted run leaves (same files, same bytes).

The points and their pass counts come from a traced uninterrupted run on a copy
(``PAIMOND_CRASH_TRACE``); each case runs the CLI in a process of its own (forked from a warm
one: ``support.warm_python``) on a fresh copy with ``PAIMOND_CRASH_AT=<point>:<n>`` and must
die with ``faults.EXIT_CODE``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest
from pypaimon.schema.schema_change import SchemaChange
from support import warm_python
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import (
    TableSpec,
    build_append_deletion_vectors,
    build_pk_deduplicate,
    catalog_for,
    sort_columns_of,
    sort_rows,
)
from support.table_garbage import unreferenced_files
from support.table_history import tree

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK
from paimond.faults import EXIT_CODE
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

BLOOM = {"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.id.items": "2000"}
EVERY_POINT = {"expire.recorded", "expire.earliest_written", "expire.snapshot_file_deleted",
               "expire.data_file_deleted", "expire.directories_removed",
               "expire.metadata_file_deleted", "expire.record_removed"}
MAX_PASSES = 40  # a point passed more often is sampled (first and last pass always)


@dataclass(frozen=True)
class Pristine:
    warehouse: Path  # never changed
    name: str
    rows: dict[int, pa.Table]  # pypaimon's read of every snapshot before expiration
    tags: dict[str, pa.Table]  # and of every tag
    model: pa.Table  # what the latest snapshot holds

    @property
    def table_dir(self) -> str:
        database, table = self.name.split(".")
        return f"{database}.db/{table}"

    def argv(self, warehouse: str) -> list[str]:
        return ["expire-snapshots", warehouse, "--table", self.name, "--retain-min", "2",
                "--older-than", "0 s", "--max-deletes", "1000"]


def _tag_rows(warehouse: str, name: str, tag: str) -> pa.Table:
    table = catalog_for(warehouse).get_table(name).copy({"scan.tag-name": tag})
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sort_rows(rows, sort_columns_of(rows.schema, table.primary_keys))


def _pristine(warehouse: Path, spec: TableSpec, tags: dict[str, int]) -> Pristine:
    catalog = catalog_for(str(warehouse)).get_table(spec.name)
    for tag, snapshot_id in tags.items():
        catalog.create_tag(tag, snapshot_id)
    storage = open_storage(str(warehouse))
    table = open_table(storage, storage.root, spec.name)
    ids = table.snapshots.list_ids()
    rows = {i: read_rows(str(warehouse), spec.name, snapshot_id=i) for i in ids}
    assert rows[ids[-1]].equals(spec.expected_rows)
    return Pristine(warehouse, spec.name, rows,
                    {t: _tag_rows(str(warehouse), spec.name, t) for t in tags},
                    spec.expected_rows)


def _primary_key(root: Path) -> Pristine:
    """Six pypaimon commits, file indexes switched on, a minor then a full paimond compaction
    (level-0 files, upgrades, rewrites and bloom-filter extra files in the history), a tag on
    snapshot 3 that holds files the expiration would otherwise delete; emptied directories
    are removed."""
    warehouse = root / "wh"
    spec = build_pk_deduplicate(str(warehouse))
    options = {**BLOOM, "snapshot.clean-empty-directories": "true"}
    catalog_for(str(warehouse)).alter_table(
        spec.name, [SchemaChange.set_option(k, v) for k, v in options.items()], False)
    storage = open_storage(str(warehouse))
    table = open_table(storage, storage.root, spec.name)
    for full in (False, True):
        CompactJob(table, clock=SYSTEM_CLOCK, full=full, use_processes=False).run()
    return _pristine(warehouse, spec, {"kept": 3})


def _deletion_vectors(root: Path) -> Pristine:
    """Three appends and two deletes by row id: deletion-vector index files, each delete
    replacing the previous ones, and an index manifest per snapshot."""
    warehouse = root / "wh"
    return _pristine(warehouse, build_append_deletion_vectors(str(warehouse)), {})


# table -> how it is built, and the points its expiration does not pass (nothing to delete)
TABLES: dict[str, tuple[Callable[[Path], Pristine], set[str]]] = {
    "primary_key": (_primary_key, set()),
    "deletion_vectors": (_deletion_vectors, {"expire.data_file_deleted",
                                             "expire.directories_removed"}),
}


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAIMOND_CRASH")}
    return warm_python.run(["-m", "paimond.cli", *argv], clean | env)


def sample(passes: int) -> list[int]:
    """Every pass, or MAX_PASSES of them spread evenly from the first to the last."""
    if passes <= MAX_PASSES:
        return list(range(1, passes + 1))
    step = (passes - 1) / (MAX_PASSES - 1)
    return sorted({1 + round(i * step) for i in range(MAX_PASSES)})


def findable_snapshots(warehouse: str, pristine: Pristine, what: str) -> list[int]:
    """Every snapshot id a reader can find: listed under snapshot/, named by a hint, or
    pypaimon's earliest and latest. Listed ids are contiguous and the hints name listed ones."""
    directory = Path(warehouse) / pristine.table_dir / "snapshot"
    listed = sorted(int(p.name.removeprefix("snapshot-")) for p in directory.glob("snapshot-*"))
    assert listed == list(range(listed[0], listed[-1] + 1)), f"{what}: snapshot ids {listed}"
    for hint in ("EARLIEST", "LATEST"):
        if (directory / hint).exists():
            named = int((directory / hint).read_text().strip())
            assert named in listed, f"{what}: {hint} names snapshot {named}, not on storage"
    manager = catalog_for(warehouse).get_table(pristine.name).snapshot_manager()
    found = {manager.try_get_earliest_snapshot().id, manager.get_latest_snapshot().id}
    assert found <= set(listed), f"{what}: pypaimon finds {found}, listed {listed}"
    return listed


def check_readable(warehouse: str, pristine: Pristine, what: str) -> None:
    for snapshot_id in findable_snapshots(warehouse, pristine, what):
        try:
            rows = read_rows(warehouse, pristine.name, snapshot_id=snapshot_id)
        except Exception as error:  # noqa: BLE001 - the failure is the finding, reported whole
            raise AssertionError(f"{what}: snapshot {snapshot_id} does not read: "
                                 f"{type(error).__name__}: {error}") from error
        assert rows.equals(pristine.rows[snapshot_id]), \
            f"{what}: snapshot {snapshot_id} reads other rows than before"
    assert read_rows(warehouse, pristine.name).equals(pristine.model), f"{what}: latest read"
    for tag, rows in pristine.tags.items():
        assert _tag_rows(warehouse, pristine.name, tag).equals(rows), f"{what}: tag {tag}"


def run_campaign(pristine: Pristine, tmp_path: Path) -> list[tuple[str, int]]:
    """Trace an uninterrupted run, then crash at each (point, pass) and rerun; returns the
    cases run."""
    traced, trace = tmp_path / "traced", tmp_path / "trace.txt"
    shutil.copytree(pristine.warehouse, traced)
    done = _run(pristine.argv(str(traced)), {"PAIMOND_CRASH_TRACE": str(trace)})
    assert done.returncode == 0, done.stdout + done.stderr
    final = tree(traced / pristine.table_dir)
    check_readable(str(traced), pristine, "uninterrupted")
    assert len(findable_snapshots(str(traced), pristine, "uninterrupted")) == 2
    # a rerun must end as this run ends (below), so no crash leaves garbage behind either
    assert unreferenced_files(str(traced), pristine.name) == []
    passes = Counter(trace.read_text().split()) if trace.exists() else Counter()
    cases = [(point, n) for point in sorted(passes) for n in sample(passes[point])]

    def crash(case: tuple[str, int]) -> None:
        point, n = case
        what = f"expire killed at {point}:{n}"
        warehouse = tmp_path / f"{point}-{n}"
        shutil.copytree(pristine.warehouse, warehouse)
        died = _run(pristine.argv(str(warehouse)), {"PAIMOND_CRASH_AT": f"{point}:{n}"})
        assert died.returncode == EXIT_CODE, \
            f"{what}: exited {died.returncode}\n{died.stdout}{died.stderr}"
        check_readable(str(warehouse), pristine, what)
        assert main(pristine.argv(str(warehouse))) == 0, f"{what}: the rerun failed"
        after = tree(warehouse / pristine.table_dir)
        assert after == final, (
            f"{what}, then rerun: differs from an uninterrupted run: extra "
            f"{sorted(set(after) - set(final))}, missing {sorted(set(final) - set(after))}, "
            f"changed {sorted(k for k in set(after) & set(final) if after[k] != final[k])}")
        shutil.rmtree(warehouse)

    with ThreadPoolExecutor(max_workers=2) as pool:  # one job process, one check at a time
        list(pool.map(crash, cases))
    print(f"\nexpire crash campaign {pristine.name}: {len(cases)} cases: "
          + ", ".join(f"{p}:{n}/{passes[p]}" for p, n in cases))
    return cases


@pytest.mark.crash_campaign
@pytest.mark.parametrize("table", sorted(TABLES))
def test_expire_killed_at_any_point_leaves_every_findable_snapshot_readable(
        table: str, tmp_path: Path) -> None:
    build, not_passed = TABLES[table]
    cases = run_campaign(build(tmp_path / "pristine"), tmp_path)
    assert {point for point, _ in cases} == EVERY_POINT - not_passed


@pytest.mark.crash_campaign
def test_a_tag_taken_between_the_crash_and_the_rerun_keeps_its_files(tmp_path: Path) -> None:
    """Killed after its first snapshot deletion, the expiration leaves the rest of the expired
    snapshots listed; a tag taken of one of them then holds files the recorded expiration
    lists, and the rerun that finishes it leaves them."""
    pristine = _primary_key(tmp_path / "pristine")
    warehouse = tmp_path / "crashed"
    shutil.copytree(pristine.warehouse, warehouse)
    died = _run(pristine.argv(str(warehouse)),
                {"PAIMOND_CRASH_AT": "expire.snapshot_file_deleted:1"})
    assert died.returncode == EXIT_CODE, died.stderr
    listed = findable_snapshots(str(warehouse), pristine, "killed")
    taken = listed[0]
    assert taken < min(pristine.rows) + 2 and taken + 2 < max(pristine.rows)  # still expiring
    catalog_for(str(warehouse)).get_table(pristine.name).create_tag("late", taken)
    assert main(pristine.argv(str(warehouse))) == 0
    assert len(findable_snapshots(str(warehouse), pristine, "rerun")) == 2
    assert _tag_rows(str(warehouse), pristine.name, "late").equals(pristine.rows[taken])
    check_readable(str(warehouse), pristine, "rerun")
    assert not list((warehouse / pristine.table_dir / ".paimond" / "expirations").iterdir())
