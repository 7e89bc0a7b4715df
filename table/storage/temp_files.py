"""Temp files a killed writer left in a table's metadata folders, and their sweep.

A local write goes to ``.<name>.<host>~<pid>~<uuid>.tmp`` beside its target and is then
linked or renamed into place (table/storage/local_files.py): a kill in between leaves the temp file
(``snapshot/``, ``changelog/``, the ``LATEST`` and ``EARLIEST`` hints, a job record's
``job.json``). Readers ignore dot files, but they pile up. A temp file is dead when its writer
is a process of this host that no longer runs, or (another host's, or one without a writer in
its name) when it is older than ``STALE_AFTER_S``; a live writer's is never touched. Only
local storage writes temp files (an S3 PUT is atomic): elsewhere the sweep lists nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from paimond.table.storage.interface import FileStatus, Storage
from paimond.table.storage.local_files import TEMP_WRITER_HOST

STALE_AFTER_S = 6 * 3600.0  # a temp file nobody can be writing any more
_TEMP = re.compile(r"^\..+\.(?:(?P<host>[^.~]+)~(?P<pid>\d+)~)?[0-9a-f]{32}\.tmp$")


def is_dead_temp(status: FileStatus, now_s: float | None) -> bool:
    """Whether ``status`` is a temp file whose writer can no longer finish it (``now_s``
    None: only by its writer, not by its age)."""
    match = _TEMP.match(status.name)
    if match is None or status.is_dir:
        return False
    host, pid = match.group("host"), match.group("pid")
    if host is not None and pid is not None and host == TEMP_WRITER_HOST and int(pid) != os.getpid():
        return not pid_alive(int(pid))
    return (now_s is not None and status.mtime_s is not None
            and now_s - status.mtime_s > STALE_AFTER_S)


def sweep_temp_files(storage: Storage, directories: Iterable[str], now_s: float) -> int:
    """Delete the dead temp files of ``directories`` (missing ones are skipped); how many."""
    scheme = storage.root.partition("://")[0] if "://" in storage.root else ""
    if scheme not in ("", "file", "local"):
        return 0  # no temp files there: no listing of snapshot/ at every job
    removed = 0
    for directory in directories:
        for status in storage.list_dir(directory):
            if is_dead_temp(status, now_s) and storage.delete(status.path):
                removed += 1
    return removed


def pid_alive(pid: int) -> bool:
    """Whether a process of this host runs with ``pid`` (another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
