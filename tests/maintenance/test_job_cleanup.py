"""A writing job's own garbage: a compaction killed mid-write (a worker's half-written temp
file and its file-index file, or whole data files) leaves a record in ``.paimond/jobs/``;
the next run deletes every file it lists that nothing references, reads stay exact, and a
live job's record is left alone. Orphan removal never touches ``.paimond/``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pypaimon.schema.schema_change import SchemaChange
from support import warm_python
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, catalog_for

from paimond.cli.main import main
from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.faults import EXIT_CODE
from paimond.maintenance.expire.orphans import OrphanJob, list_candidates
from paimond.maintenance.expire.references import referencing_snapshots, used_files
from paimond.maintenance.job_cleanup import clean_dead_jobs
from paimond.table.catalog import Table, open_table
from paimond.table.commit.job_records import jobs_dir, listed_files, read_records, start_job
from paimond.table.storage.interface import open_storage

INDEXED = {"file-index.bloom-filter.columns": "id", "file-index.bloom-filter.id.items": "2000",
           "file-index.in-manifest-threshold": "1 b"}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    warehouse = tmp_path_factory.mktemp("jobs") / "wh"
    spec = build_pk_deduplicate(str(warehouse))
    catalog_for(str(warehouse)).alter_table(
        spec.name, [SchemaChange.set_option(k, v) for k, v in INDEXED.items()], False)
    return warehouse, spec.name


@pytest.fixture
def copy(pristine: tuple[Path, str], tmp_path: Path) -> tuple[str, Table]:
    shutil.copytree(pristine[0], tmp_path / "wh")
    storage = open_storage(str(tmp_path / "wh"))
    return str(tmp_path / "wh"), open_table(storage, storage.root, pristine[1])


def _unreferenced(table: Table) -> set[str]:
    """Files in the table that nothing references: data, index, temp files (every age)."""
    used = used_files(table, referencing_snapshots(table)).all
    candidates = {c.status.path for c in list_candidates(table)
                  if not c.by_name or c.status.name not in used}
    temps = {str(p) for p in Path(table.path).rglob(".*.tmp")}
    return candidates | temps


def _killed_compaction(warehouse: str, table: Table, point: str, parallelism: int) -> int:
    env = {**os.environ, "PAIMOND_CRASH_AT": point}
    return warm_python.run(["-m", "paimond.cli", "compact", warehouse, "--table", table.name,
                            "--full", "--parallelism", str(parallelism)], env).returncode


def test_the_next_compaction_cleans_a_killed_one(copy: tuple[str, Table]) -> None:
    warehouse, table = copy
    rows = read_rows(warehouse, table.name)
    assert _unreferenced(table) == set()
    # The file index is written before its data file is published: killed there, the data
    # file is a half-written temp file and the index file exists.
    assert _killed_compaction(warehouse, table, "file_index.file_written", 1) == EXIT_CODE
    left = _unreferenced(table)
    assert any(p.endswith(".tmp") for p in left) and any(p.endswith(".index") for p in left)
    [record] = read_records(table)
    assert record.job == "compact" and record.owner.pid != os.getpid()
    listed = listed_files(table.storage, record.directory)
    assert {os.path.basename(p) for p in listed} >= {os.path.basename(p) for p in left
                                                     if not p.endswith(".tmp")}

    assert main(["compact", warehouse, "--table", table.name, "--full"]) == 0
    assert _unreferenced(table) == set()
    assert read_records(table) == [] and not list(Path(jobs_dir(table)).rglob("*.*"))
    assert read_rows(warehouse, table.name).equals(rows)


def test_a_killed_worker_is_cleaned_by_its_own_run(copy: tuple[str, Table]) -> None:
    """Whole data files of a worker that died: the run itself fails those buckets and,
    ending, deletes what they wrote."""
    warehouse, table = copy
    rows = read_rows(warehouse, table.name)
    _killed_compaction(warehouse, table, "data_files.file_written", 2)
    assert _unreferenced(table) == set() and read_records(table) == []
    assert read_rows(warehouse, table.name).equals(rows)


def test_a_live_jobs_record_is_left_alone(copy: tuple[str, Table]) -> None:
    warehouse, table = copy
    live = start_job(table, "compact", started_ms=SYSTEM_CLOCK.wall_ms())
    busy = table.file_path("bucket-0", "data-live-0.parquet")  # being written by the live job
    live.note(table.storage, busy)
    table.storage.write_bytes(busy, b"half")
    assert main(["compact", warehouse, "--table", table.name, "--full"]) == 0
    assert os.path.exists(busy) and [r.job_id for r in read_records(table)] == [live.job_id]
    far_past = Clock(fixed_ms=SYSTEM_CLOCK.wall_ms() - 3_600_000)
    assert clean_dead_jobs(table, far_past.wall_ms()).records_removed == 0
    # orphan removal, even with a forced short window, spares it and .paimond/
    result = OrphanJob(table, clock=Clock(fixed_ms=SYSTEM_CLOCK.wall_ms() + 60_000),
                       older_than_ms=SYSTEM_CLOCK.wall_ms() + 30_000, force=True).run()
    assert os.path.exists(busy) and read_records(table) != []
    assert result.removed.total_files == 0
    live.end()  # the job is gone now (this process no longer runs it)
    assert clean_dead_jobs(table, SYSTEM_CLOCK.wall_ms()).files_deleted == 1
    assert not os.path.exists(busy) and read_records(table) == []


def test_a_dead_process_on_this_host_and_an_expired_record(copy: tuple[str, Table]) -> None:
    _, table = copy
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    for pid, host, started_ms in ((int(gone.stdout), os.uname().nodename, SYSTEM_CLOCK.wall_ms()),
                                  (1, "elsewhere", 0)):
        journal = start_job(table, "rewrite-index", started_ms=0)
        path = table.file_path("bucket-1", f"data-{pid}-0.parquet")
        journal.note(table.storage, path)
        table.storage.write_bytes(path, b"x")
        body = json.loads(journal.body) | {"pid": pid, "host": host, "started_ms": started_ms}
        journal.end()
        table.storage.write_bytes(table.storage.join(journal.directory, "job.json"),
                                  json.dumps(body).encode())
    young_elsewhere = start_job(table, "compact", started_ms=SYSTEM_CLOCK.wall_ms())
    body = json.loads(young_elsewhere.body) | {"host": "elsewhere"}
    young_elsewhere.end()
    table.storage.write_bytes(table.storage.join(young_elsewhere.directory, "job.json"),
                              json.dumps(body).encode())
    result = clean_dead_jobs(table, SYSTEM_CLOCK.wall_ms())
    assert (result.records_removed, result.files_deleted) == (2, 2)
    assert [r.job_id for r in read_records(table)] == [young_elsewhere.job_id]
    assert _unreferenced(table) == set()


def test_a_copied_tables_records_never_reach_the_original(copy: tuple[str, Table],
                                                          tmp_path: Path) -> None:
    """A record lists paths relative to its table: cleaning a copy (a backup restored
    elsewhere) deletes the copy's files, never the original's."""
    warehouse, table = copy
    journal = start_job(table, "compact", started_ms=0)
    path = table.file_path("bucket-0", "data-dead-0.parquet")
    journal.note(table.storage, path)
    table.storage.write_bytes(path, b"x")
    journal.end()
    outside = str(tmp_path / "elsewhere" / "data-outside-0.parquet")
    journal.note(table.storage, outside)  # outside the table: not noted
    assert listed_files(table.storage, journal.directory) == [path]

    shutil.copytree(warehouse, tmp_path / "wh-copy")
    storage = open_storage(str(tmp_path / "wh-copy"))
    twin = open_table(storage, storage.root, table.name)
    assert clean_dead_jobs(twin, SYSTEM_CLOCK.wall_ms()).files_deleted == 1
    assert os.path.exists(path), "the original's file is untouched"
    assert not os.path.exists(twin.file_path("bucket-0", "data-dead-0.parquet"))


def test_a_marker_that_climbs_out_of_the_table_is_ignored(copy: tuple[str, Table],
                                                         tmp_path: Path) -> None:
    _, table = copy
    journal = start_job(table, "compact", started_ms=0)
    victim = tmp_path / "precious.parquet"
    victim.write_bytes(b"keep me")
    journal.note(table.storage, table.file_path("bucket-0", "data-x-0.parquet"))
    for name, text in (("a", str(victim)), ("b", "../../../precious.parquet"),
                       ("c", "file:///etc/passwd")):
        table.storage.write_bytes(table.storage.join(journal.directory, "files", name),
                                  text.encode())
    journal.end()
    assert listed_files(table.storage, journal.directory) == [
        table.file_path("bucket-0", "data-x-0.parquet")]
    clean_dead_jobs(table, SYSTEM_CLOCK.wall_ms())
    assert victim.read_bytes() == b"keep me"


def test_a_record_with_half_written_temp_files_is_removed_whole(copy: tuple[str, Table]) -> None:
    """A worker terminated while writing ``job.json`` or a marker (a broken process pool kills
    the others) leaves their temp files in the record: the cleanup removes the record whole."""
    _, table = copy
    journal = start_job(table, "compact", started_ms=SYSTEM_CLOCK.wall_ms())
    path = table.file_path("bucket-0", "data-killed-0.parquet")
    journal.note(table.storage, path)
    table.storage.write_bytes(path, b"half")
    record_dir = Path(journal.directory)
    (record_dir / ".job.json.0123456789abcdef.tmp").write_bytes(b"{\"job_id\"")
    (record_dir / "files" / ".0123456789abcdef01234567.feed.tmp").write_bytes(b"bucket")
    journal.end()
    result = clean_dead_jobs(table, SYSTEM_CLOCK.wall_ms())
    assert (result.records_removed, result.files_deleted) == (1, 1)
    assert not record_dir.exists() and read_records(table) == []
    assert _unreferenced(table) == set()
