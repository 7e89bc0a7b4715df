"""`paimond compact`: dry run, summary, concurrency with a pypaimon writer, crashes, bad input."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, catalog_for, sort_rows

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import data_file_path, scan_snapshot
from paimond.table.storage.interface import open_storage


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    warehouse = tmp_path_factory.mktemp("cli") / "wh"
    return warehouse, build_pk_deduplicate(str(warehouse))


@pytest.fixture
def copy(pristine: tuple[Path, Any], tmp_path: Path) -> tuple[str, Any]:
    shutil.copytree(pristine[0], tmp_path / "wh")
    return str(tmp_path / "wh"), pristine[1]


def _files_on_disk(warehouse: str) -> set[str]:
    return {str(p) for p in Path(warehouse).rglob("*") if p.is_file()}


def test_dry_run_changes_nothing(copy: tuple[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, spec = copy
    before = _files_on_disk(warehouse)
    assert main(["compact", warehouse, "--table", spec.name, "--full", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "buckets to compact" in out and "-> level 5 [full" in out
    assert _files_on_disk(warehouse) == before


def test_compact_prints_a_summary(copy: tuple[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, spec = copy
    content = read_rows(warehouse, spec.name)
    assert main(["compact", warehouse, "--table", spec.name, "--full", "--parallelism", "2"]) == 0
    out = capsys.readouterr().out
    assert "snapshot 7 after 1 attempt(s)" in out and "failed 0" in out and "rows read" in out
    assert read_rows(warehouse, spec.name).equals(content)


def _write_rows(warehouse: str, spec: Any, ids: list[int]) -> None:
    table = catalog_for(warehouse).get_table(spec.name)
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    arrow_schema = pa.schema([f for f in spec.expected_rows.schema])
    rows = spec.expected_rows.slice(0, 1).to_pylist()[0]
    batch = [{**rows, "id": i, "rk": "+I"} for i in ids]
    write.write_arrow(pa.Table.from_pylist(batch, schema=arrow_schema))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def test_a_writer_commits_while_compaction_runs(copy: tuple[str, Any]) -> None:
    warehouse, spec = copy
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    job = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False, parallelism=1)
    wrote = []

    def progress(done: int, total: int, task: object) -> None:
        if not wrote:  # mid-job: an ingestion commit lands before ours
            _write_rows(warehouse, spec, [900_001, 900_002])
            wrote.append(True)

    job.progress = progress
    before = read_rows(warehouse, spec.name)
    summary = job.run()
    assert summary.snapshot is not None and wrote
    after = read_rows(warehouse, spec.name)
    assert after.num_rows == before.num_rows + 2, "both commits survive, nothing duplicated"
    assert set(after.column("id").to_pylist()) >= {900_001, 900_002}
    # The writer's new files are untouched level-0 files in the compacted snapshot.
    levels = [f.meta.level for f in scan_snapshot(table, summary.snapshot).files]
    assert 0 in levels and 5 in levels


def test_inputs_removed_meanwhile_make_the_job_replan(copy: tuple[str, Any]) -> None:
    warehouse, spec = copy
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    first = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False)
    second = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False)
    raced = []

    def progress(done: int, total: int, task: object) -> None:
        if not raced:  # another compactor commits first: our inputs are gone
            raced.append(second.run())

    first.progress = progress
    content = read_rows(warehouse, spec.name)
    summary = first.run()
    assert raced and raced[0].snapshot is not None
    assert summary.attempts == 2, "conflict detected, re-planned"
    assert read_rows(warehouse, spec.name).equals(content)


def _compact_then_die(warehouse: str, name: str, stage: str) -> None:
    import paimond.table.commit.committer as commit

    table = open_table(open_storage(warehouse), warehouse, name)
    original = commit.Committer._write_snapshot

    def die_after_manifests(self: Any, *args: Any) -> Any:
        snapshot = original(self, *args)
        if stage == "before-snapshot":
            os.kill(os.getpid(), signal.SIGKILL)
        return snapshot

    if stage == "before-commit":
        def die(self: Any, changes: Any) -> Any:
            os.kill(os.getpid(), signal.SIGKILL)
        commit.Committer.commit = die  # type: ignore[method-assign]
    else:
        commit.Committer._write_snapshot = die_after_manifests  # type: ignore[method-assign]
    CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()


@pytest.mark.parametrize("stage", ["before-commit", "before-snapshot"])
def test_a_crash_before_the_snapshot_leaves_the_table_unchanged(copy: tuple[str, Any],
                                                                stage: str) -> None:
    warehouse, spec = copy
    content = read_rows(warehouse, spec.name)
    snapshots = sorted(Path(warehouse).rglob("snapshot-*"))
    process = multiprocessing.get_context("spawn").Process(
        target=_compact_then_die, args=(warehouse, spec.name, stage))
    process.start()
    process.join(120)
    assert process.exitcode == -signal.SIGKILL
    assert sorted(Path(warehouse).rglob("snapshot-*")) == snapshots
    assert sort_rows(read_rows(warehouse, spec.name), spec.sort_columns).equals(
        sort_rows(content, spec.sort_columns))
    # Only orphans were left; a rerun finishes the job.
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    assert CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run().snapshot is not None
    assert read_rows(warehouse, spec.name).equals(content)


def test_a_corrupt_input_fails_only_its_bucket(copy: tuple[str, Any]) -> None:
    warehouse, spec = copy
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    latest = table.snapshots.latest()
    assert latest is not None
    buckets = scan_snapshot(table, latest).buckets()
    victim_bucket = next(iter(buckets.values()))
    victim = data_file_path(table, table.latest_schema(), victim_bucket.files[0])
    Path(victim).write_bytes(b"PAR1 this is not a parquet file PAR1")
    summary = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
    assert len(summary.failures) == 1
    assert victim in summary.failures[0].error and "CorruptFileError" in summary.failures[0].error
    assert summary.snapshot is not None and len(summary.results) == len(buckets) - 1
    compacted = {(f.entry.partition, f.entry.bucket) for f in scan_snapshot(table, summary.snapshot).files
                 if f.meta.level == 5}
    assert (victim_bucket.partition, victim_bucket.bucket) not in compacted
    assert len(compacted) == len(buckets) - 1


# The paimond command with its worker pool started as Python 3.14 starts one on Linux (and as
# macOS does, by spawn): each worker a fresh interpreter that imports what it runs and receives
# its task pickled, none of the parent's modules or state inherited.
FRESH_WORKERS = """
import concurrent.futures, multiprocessing, sys

START_METHOD = sys.argv.pop(1)

class FreshWorkers(concurrent.futures.ProcessPoolExecutor):
    def __init__(self, *args, **kwargs):
        kwargs["mp_context"] = multiprocessing.get_context(START_METHOD)
        print("pool", kwargs["mp_context"].get_start_method(), file=sys.stderr)
        super().__init__(*args, **kwargs)

concurrent.futures.ProcessPoolExecutor = FreshWorkers
from paimond.cli.main import main
sys.exit(main())  # as the paimond command (worker processes), arguments from sys.argv
"""


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_workers_that_start_fresh_compact_alike(copy: tuple[str, Any], start_method: str) -> None:
    warehouse, spec = copy
    content = read_rows(warehouse, spec.name)
    done = subprocess.run(
        [sys.executable, "-c", FRESH_WORKERS, start_method, "compact", warehouse, "--table",
         spec.name, "--full", "--parallelism", "2"],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"pool {start_method}" in done.stderr  # the workers did start that way
    assert "snapshot 7 after 1 attempt(s)" in done.stdout and "failed 0" in done.stdout
    assert read_rows(warehouse, spec.name).equals(content)
    table = open_table(open_storage(warehouse), warehouse, spec.name)
    latest = table.snapshots.latest()
    assert latest is not None
    assert all(f.meta.level == 5 for f in scan_snapshot(table, latest).files)
