"""In-progress records of the jobs writing a table's files, so that a killed job's own output is
cleaned by the next run instead of waiting for orphan removal's window. Paimon has no
counterpart (its writers leave such files to ``remove_orphan_files``).

A writing job keeps ``<table>/.paimond/jobs/<job-id>/``: ``job.json`` (the job's name, its
owner: host, pid, process token and replica, and its start time from the injected clock),
written before anything else, and one small marker per file under ``files/``, created *before*
the file it names is opened, whoever writes it; a marker's name spells the path it notes
(percent-encoded, so that one listing gives them all; a path too long for a file name gets a
hash as its name and is read from the marker's content) (the driver or a worker process, which only
needs the picklable :class:`JobJournal`). A job deletes its record when it ends; a record left
behind belongs to a job that was killed, unless its owner still runs. A daemon names its
replica (:func:`set_replica`, its stable ``daemon.replica_id``): a record of that replica written
by an earlier process, on whatever host (a rescheduled pod), is dead at once, as its lease is.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import urllib.parse
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from paimond.errors import CodecError, CorruptFileError, MissingFileError
from paimond.table.catalog import Table
from paimond.table.layout import (
    BRANCH_DIR,
    CHANGELOG_DIR,
    CONSUMER_DIR,
    JOBS_DIR,
    MANIFEST_DIR,
    PAIMOND_DIR,
    SCHEMA_DIR,
    SNAPSHOT_DIR,
    TAG_DIR,
)
from paimond.table.storage.delegating import DelegatingStorage
from paimond.table.storage.interface import FileStatus, OutputStream, Storage
from paimond.table.storage.temp_files import is_dead_temp, pid_alive

JOB_FILE, FILES_DIR = "job.json", "files"
DEFAULT_DEAD_AFTER_MS = 6 * 3_600_000  # a record this old is dead whoever owns it
PROCESS_TOKEN = uuid.uuid4().hex  # tells this process from an earlier one with the same pid
_RUNNING: set[str] = set()  # job ids this process runs now
_STARTED: set[str] = set()  # record directories whose job.json this process wrote
_REPLICA: list[str] = [""]  # this process's daemon replica id ("": not a daemon)
_METADATA_DIRS = frozenset({MANIFEST_DIR, SNAPSHOT_DIR, CHANGELOG_DIR, SCHEMA_DIR, TAG_DIR,
                            CONSUMER_DIR, BRANCH_DIR})


@dataclass(frozen=True, slots=True)
class JobOwner:
    host: str
    pid: int
    process: str
    replica: str

    @classmethod
    def current(cls, replica: str | None = None) -> JobOwner:
        return cls(socket.gethostname(), os.getpid(), PROCESS_TOKEN, replica or _REPLICA[0])


def set_replica(replica: str) -> None:
    """This process is the daemon replica ``replica``: its records carry the id, and one of an
    earlier process of the same replica is dead wherever it ran. Only one live process per
    replica id (the leases' assumption too)."""
    _REPLICA[0] = replica


@dataclass(frozen=True, slots=True)
class JobRecord:
    job_id: str
    job: str
    owner: JobOwner
    started_ms: int
    directory: str


def jobs_dir(table: Table) -> str:
    return table.file_path(PAIMOND_DIR, JOBS_DIR)


_NAMED_MARKER = "p-"  # a marker whose name spells the path
_MAX_MARKER_NAME = 200  # local file systems take 255 bytes


def _marker_name(path: str) -> str:
    named = _NAMED_MARKER + urllib.parse.quote(path, safe="")
    return named if len(named) <= _MAX_MARKER_NAME else hashlib.sha1(path.encode()).hexdigest()[:24]


def _noted_path(storage: Storage, marker: FileStatus) -> str:
    """The table-relative path a marker notes: from its name, else its content."""
    if marker.name.startswith(_NAMED_MARKER):
        return urllib.parse.unquote(marker.name[len(_NAMED_MARKER):], errors="strict")
    return storage.read_bytes(marker.path).decode()


@dataclass(frozen=True, slots=True)
class JobJournal:
    """Where one job notes its files; plain picklable data, so a worker notes its own. The
    record's ``job.json`` is written with the first note in each process (the same bytes each
    time), so a job that writes nothing costs no write."""

    directory: str  # <table>/.paimond/jobs/<job-id>
    job_id: str
    body: bytes  # job.json

    def note(self, storage: Storage, path: str) -> None:
        """Record ``path`` before it is written (an idempotent overwrite), relative to the
        table: a copy of the table (a backup, a restore under another root) must never lead a
        cleanup to the original's files. A file outside the table is not noted (orphan
        removal covers it)."""
        relative = _relative_to_table(self.directory, path)
        if relative is None:
            return
        if self.directory not in _STARTED:
            storage.write_bytes(storage.join(self.directory, JOB_FILE), self.body)
            _STARTED.add(self.directory)
        storage.write_bytes(storage.join(self.directory, FILES_DIR, _marker_name(relative)),
                            relative.encode())

    def end(self) -> None:
        """This process no longer runs the job: a record it left is dead from now on."""
        _RUNNING.discard(self.job_id)

    def recording(self, storage: Storage) -> Storage:
        """``storage`` noting every file opened or written through it."""
        return RecordingStorage(storage, self)


def start_job(table: Table, job: str, *, started_ms: int, replica: str | None = None) -> JobJournal:
    """A new job's journal; the job then writes through ``journal.recording(storage)`` and
    ends with :func:`delete_record`."""
    job_id = f"{job}-{uuid.uuid4().hex}"
    owner = JobOwner.current(replica)
    body = {"job_id": job_id, "job": job, "started_ms": started_ms, "host": owner.host,
            "pid": owner.pid, "process": owner.process, "replica": owner.replica}
    _RUNNING.add(job_id)
    return JobJournal(table.storage.join(jobs_dir(table), job_id), job_id,
                      json.dumps(body).encode())


def read_records(table: Table) -> list[JobRecord]:
    """Every job record of the table; one without a readable ``job.json`` is owned by
    nobody and dies when its directory is older than the TTL."""
    records = []
    for status in table.storage.list_dir(jobs_dir(table)):
        if not status.is_dir:
            continue
        try:
            raw = json.loads(table.storage.read_bytes(table.storage.join(status.path, JOB_FILE)))
            owner = JobOwner(str(raw["host"]), int(raw["pid"]), str(raw["process"]),
                             str(raw["replica"]))
            records.append(JobRecord(str(raw["job_id"]), str(raw["job"]), owner,
                                     int(raw["started_ms"]), status.path))
        except (MissingFileError, CorruptFileError, CodecError, ValueError, KeyError, TypeError):
            # Being created or deleted, or killed meanwhile: dead once the directory is old,
            # or at once when the temp file of its job.json names a writer that is gone.
            started_ms = int((status.mtime_s or 0) * 1000)
            if any(is_dead_temp(s, None) for s in table.storage.list_dir(status.path)):
                started_ms = 0
            records.append(JobRecord(status.name, "", JobOwner("", 0, "", ""), started_ms,
                                     status.path))
    return records


def is_dead(record: JobRecord, now_ms: int, dead_after_ms: int = DEFAULT_DEAD_AFTER_MS) -> bool:
    """Whether ``record``'s job can no longer write: older than ``dead_after_ms``, owned by an
    earlier process of this daemon replica on another host, or owned on this host by a process
    that is gone, by an earlier process with our pid, or by this process but not running any
    more."""
    if now_ms - record.started_ms > dead_after_ms:
        return True
    owner = record.owner
    if owner.host != socket.gethostname():
        return bool(_REPLICA[0]) and owner.replica == _REPLICA[0] and owner.process != PROCESS_TOKEN
    if owner.pid == os.getpid():
        return owner.process != PROCESS_TOKEN or record.job_id not in _RUNNING
    return not pid_alive(owner.pid)


def _table_root(record_dir: str) -> str:
    """``<table>`` of ``<table>/.paimond/jobs/<job-id>``."""
    return record_dir.rstrip("/").rsplit("/", 3)[0]


def _relative_to_table(record_dir: str, path: str) -> str | None:
    root = _table_root(record_dir) + "/"
    return path[len(root):] if path.startswith(root) else None


def list_markers(storage: Storage, record_dir: str) -> list[FileStatus]:
    """The markers of a record (one listing), for :func:`listed_files` and
    :func:`delete_record`."""
    return storage.list_dir(storage.join(record_dir, FILES_DIR))


def listed_files(storage: Storage, record_dir: str,
                 markers: Sequence[FileStatus] | None = None) -> list[str]:
    """The paths a record's job noted, under the table that holds the record; ``markers``:
    :func:`list_markers`' answer, if at hand. Markers that vanished meanwhile are skipped, and
    so is anything that is not a plain path inside the table (absolute, a URI, or climbing out
    with ``..``): nothing outside is ever deleted."""
    root = _table_root(record_dir)
    paths = []
    for status in list_markers(storage, record_dir) if markers is None else markers:
        try:
            relative = _noted_path(storage, status)
        except (MissingFileError, UnicodeDecodeError):
            continue
        parts = relative.split("/")
        if relative.startswith("/") or "://" in relative or ".." in parts or "" in parts:
            continue
        paths.append(storage.join(root, relative))
    return paths


def recorded_names(table: Table) -> set[str]:
    """The file names every record of the table lists (orphan removal leaves them alone)."""
    return {p.rpartition("/")[2] for r in read_records(table)
            for p in listed_files(table.storage, r.directory)}


def delete_files(storage: Storage, paths: Iterable[str], keep: Collection[str]) -> int:
    """Delete each path whose file name is not in ``keep``, with a local temp file left
    half written beside it (``.<name>.<uuid>.tmp``); returns how many files were deleted."""
    gone = _unkept(paths, keep)
    deleted = sum(storage.delete(path) for path in gone)
    return deleted + sum(storage.delete(path) for path in _temps_beside(storage, gone))


def delete_unkept(storage: Storage, paths: Iterable[str], keep: Collection[str]) -> None:
    """:func:`delete_files` for a job that ends, without counting: nothing is asked first,
    and deletes go in batches (on object stores up to 1,000 keys a request)."""
    gone = _unkept(paths, keep)
    if gone:
        storage.delete_many(gone)
        storage.delete_many(_temps_beside(storage, gone))


def _unkept(paths: Iterable[str], keep: Collection[str]) -> list[str]:
    return [path for path in paths if path.rpartition("/")[2] not in keep]


def _temps_beside(storage: Storage, paths: Sequence[str]) -> list[str]:
    """The temp files (``.<name>.<uuid>.tmp``) left half written beside ``paths``."""
    by_directory: dict[str, set[str]] = {}
    for path in paths:
        directory, _, name = path.rpartition("/")
        by_directory.setdefault(directory, set()).add(name)
    temps = []
    for directory, names in by_directory.items():
        for status in storage.list_dir(directory):
            stem = status.name[1:].rsplit(".", 2)[0] if status.name.endswith(".tmp") else ""
            if status.name.startswith(".") and stem in names:
                temps.append(status.path)
    return temps


def delete_record(storage: Storage, record_dir: str,
                  markers: Sequence[FileStatus] | None = None) -> None:
    """Markers first, ``job.json`` last: a half-deleted record still reads as a record. The
    temp files a process killed while writing a marker or ``job.json`` left (a worker a broken
    pool terminated) go too: the directory is the job's alone. ``markers``:
    :func:`list_markers`' answer, if at hand. Deletes ask nothing first and go in batches."""
    listed = list_markers(storage, record_dir) if markers is None else markers
    others = [s.path for s in storage.list_dir(record_dir)
              if not s.is_dir and s.name != JOB_FILE]
    storage.delete_many([*(s.path for s in listed), *others])
    storage.delete_dir_if_empty(storage.join(record_dir, FILES_DIR))
    storage.delete_many([storage.join(record_dir, JOB_FILE)])
    storage.delete_dir_if_empty(record_dir)
    _STARTED.discard(record_dir)


class RecordingStorage(DelegatingStorage):
    """A ``Storage`` that notes every file before it is opened or written: a job's data,
    file-index and DV index files. Never what a commit writes (manifests, snapshots, hints),
    which a job's end would otherwise take for its garbage: commits use the table's own
    storage, and a path in a metadata directory is not noted even if one did not."""

    def __init__(self, inner: Storage, journal: JobJournal) -> None:
        super().__init__(inner)
        self._journal = journal

    def _note(self, path: str) -> None:
        parent = path.rsplit("/", 2)[-2] if "/" in path else ""
        if parent not in _METADATA_DIRS:
            self._journal.note(self._inner, path)

    def open_output(self, path: str) -> OutputStream:
        self._note(path)
        return self._inner.open_output(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._note(path)
        self._inner.write_bytes(path, data)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        self._note(path)
        return self._inner.create_exclusive(path, data)
