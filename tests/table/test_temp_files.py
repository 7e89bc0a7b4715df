"""Temp files a killed writer left (`snapshot/.snapshot-N.<...>.tmp`, `.LATEST...tmp`,
a job record's `.job.json...tmp`) are swept; a live writer's never are."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from paimond.table.catalog import Table
from paimond.table.commit.job_records import JOB_FILE, is_dead, jobs_dir, read_records
from paimond.table.storage.interface import open_storage
from paimond.table.storage.local_files import create_file_exclusive, temp_name
from paimond.table.storage.temp_files import STALE_AFTER_S, sweep_temp_files


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def _temp(directory: Path, name: str, host: str, pid: int) -> Path:
    path = directory / f".{name}.{host}~{pid}~{uuid.uuid4().hex}.tmp"
    path.write_bytes(b"half")
    return path


def test_a_dead_writers_temp_files_go_a_live_ones_stay(tmp_path: Path) -> None:
    snapshot_dir = tmp_path / "snapshot"
    snapshot_dir.mkdir()
    host = socket.gethostname()
    dead = [_temp(snapshot_dir, "snapshot-7", host, _dead_pid()),
            _temp(snapshot_dir, "LATEST", host, _dead_pid())]
    live = [_temp(snapshot_dir, "snapshot-8", host, os.getpid()),  # being written here
            _temp(snapshot_dir, "EARLIEST", host, os.getppid())]
    recent_elsewhere = _temp(snapshot_dir, "snapshot-9", "another-host", 12)
    old_elsewhere = _temp(snapshot_dir, "snapshot-10", "another-host", 13)
    old_unnamed = snapshot_dir / f".snapshot-11.{uuid.uuid4().hex}.tmp"  # an older release's
    old_unnamed.write_bytes(b"half")
    long_ago = time.time() - STALE_AFTER_S - 60
    for path in (old_elsewhere, old_unnamed):
        os.utime(path, (long_ago, long_ago))
    other = snapshot_dir / "snapshot-1"
    other.write_bytes(b"{}")
    storage = open_storage(str(tmp_path))
    removed = sweep_temp_files(storage, [str(snapshot_dir), str(tmp_path / "missing")],
                               time.time())
    assert removed == 4
    left = {p.name for p in snapshot_dir.iterdir()}
    assert left == {p.name for p in (*live, recent_elsewhere, other)}
    assert not any(p.exists() for p in dead)


def test_local_writes_name_their_writer(tmp_path: Path) -> None:
    assert f"{socket.gethostname()}~{os.getpid()}~" in temp_name("snapshot-3")
    assert create_file_exclusive(str(tmp_path / "snapshot-3"), b"x")
    assert [p.name for p in tmp_path.iterdir()] == ["snapshot-3"]  # the temp file is gone


def test_a_job_record_whose_job_json_was_never_linked_is_dead_at_once(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    table = Table(storage, str(tmp_path / "db.db" / "t"), "db.t")
    record = Path(jobs_dir(table)) / "0123abcd"
    record.mkdir(parents=True)
    _temp(record, JOB_FILE, socket.gethostname(), _dead_pid())
    [found] = read_records(table)
    assert is_dead(found, now_ms=int(time.time() * 1000))
    live_record = Path(jobs_dir(table)) / "4567ef01"
    live_record.mkdir()
    _temp(live_record, JOB_FILE, socket.gethostname(), os.getpid())
    records = {r.directory.rsplit("/", 1)[-1]: r for r in read_records(table)}
    assert not is_dead(records["4567ef01"], now_ms=int(time.time() * 1000))
