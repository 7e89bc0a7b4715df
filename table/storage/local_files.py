"""Local files without fsspec: atomic writes (complete-or-absent files, whole or streamed),
exclusive creation without locks, directory listings and ``file:`` URIs.

Java ``LocalFileIO`` renames under a JVM-local lock, which does not exclude other processes;
here ``link(2)`` of a synced temp file refuses an existing target across processes. A target's
directory must exist: the storage makes it (``FsspecStorage._local_parent``, which never makes a
warehouse root again once it is gone), so nothing here creates directories.
"""

from __future__ import annotations

import errno
import os
import socket
import uuid
from contextlib import suppress
from typing import BinaryIO

_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.ENOSYS}
_OUTPUT_BUFFER_BYTES = 1 << 20
# this host in a temp file's name (table/storage/temp_files.py reads it back)
TEMP_WRITER_HOST = socket.gethostname().replace("~", "-").replace("/", "-")


def temp_name(name: str) -> str:
    """``.<name>.<host>~<pid>~<uuid>.tmp``: the writer is named, so that a sweep can tell the
    temp file of a killed process from one being written (table/storage/temp_files.py)."""
    return f".{name}.{TEMP_WRITER_HOST}~{os.getpid()}~{uuid.uuid4().hex}.tmp"


def open_temp_beside(target: str) -> tuple[BinaryIO, str]:
    """A new temp file (``temp_name``) beside ``target``, open for writing, and its path;
    finish it with :func:`publish_temp` or :func:`discard_temp`."""
    directory, name = os.path.split(target)
    temp = os.path.join(directory, temp_name(name))
    return open(temp, "xb", buffering=_OUTPUT_BUFFER_BYTES), temp


def publish_temp(file: BinaryIO, temp: str, target: str) -> None:
    """Sync the temp file and rename it over ``target``: readers never see it half written.
    On failure the temp file is removed."""
    try:
        file.flush()
        os.fsync(file.fileno())
        file.close()
        os.replace(temp, target)
    except BaseException:
        discard_temp(file, temp)
        raise
    _fsync_dir(os.path.dirname(target))


def discard_temp(file: BinaryIO, temp: str) -> None:
    with suppress(OSError):
        file.close()
    _remove_quietly(temp)


def start_writeback(file: BinaryIO) -> None:
    """Ask the kernel to start writing the file's flushed bytes to disk, without waiting:
    the sync at publish then waits only for what came after (an 85 MB data file: 37 -> 3 ms
    of fsync). Linux's ``POSIX_FADV_DONTNEED`` starts the writeback of dirty pages and drops
    the clean ones, which this process does not read again (PostgreSQL's ``pg_flush_data``
    falls back to it without ``sync_file_range``). Elsewhere, or where the file system
    refuses the advice, nothing: it is a hint, and the sync at publish does the work anyway."""
    if hasattr(os, "posix_fadvise"):
        with suppress(OSError):
            os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def replace_file(target: str, data: bytes) -> None:
    temp = _synced_temp(target, data)
    try:
        os.replace(temp, target)
    except BaseException:
        _remove_quietly(temp)
        raise
    _fsync_dir(os.path.dirname(target))


def create_file_exclusive(target: str, data: bytes) -> bool:
    """Link a complete, synced temp file to ``target``: link(2) refuses an existing target,
    across processes, and the target never shows partial content."""
    temp = _synced_temp(target, data)
    try:
        os.link(temp, target)
    except FileExistsError:
        return False
    except OSError as e:
        if e.errno not in _NO_HARD_LINKS:
            raise
        return _create_exclusive_without_link(target, data)
    finally:
        _remove_quietly(temp)
    _fsync_dir(os.path.dirname(target))
    return True


def _create_exclusive_without_link(target: str, data: bytes) -> bool:
    """Fallback without hard links: exclusive, but a reader may see the file filling up."""
    created = False
    try:
        with open(target, "xb") as f:  # O_CREAT | O_EXCL
            created = True
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except FileExistsError:
        return False
    except BaseException:
        if created:
            _remove_quietly(target)  # ours, and never to be left half written
        raise
    return True


def _synced_temp(target: str, data: bytes) -> str:
    """``data`` in a new temp file (``temp_name``) beside ``target``, flushed to disk."""
    directory, name = os.path.split(target)
    temp = os.path.join(directory, temp_name(name))
    try:
        with open(temp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _remove_quietly(temp)
        raise
    return temp


def _fsync_dir(directory: str) -> None:
    """Make a new directory entry durable; best effort, as not every OS opens directories."""
    with suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove_quietly(path: str) -> None:
    with suppress(FileNotFoundError):
        os.remove(path)


def list_directory(directory: str) -> list[tuple[str, os.stat_result]]:
    """(name, status) of each entry of ``directory``, symbolic links followed (a link to
    nothing: the link's own status). An entry removed while the directory is read is left
    out, rather than failing the listing. Raises FileNotFoundError and NotADirectoryError."""
    found = []
    with os.scandir(directory) as entries:
        for entry in entries:
            try:
                found.append((entry.name, _status(entry)))
            except FileNotFoundError:
                continue
    return found


def _status(entry: os.DirEntry[str]) -> os.stat_result:
    try:
        return entry.stat()
    except FileNotFoundError:
        return entry.stat(follow_symlinks=False)


def local_uri_path(uri: str) -> str:
    """The absolute path of a ``file:`` or ``local:`` URI (``file:///a``, ``file:/a``,
    ``local://a``...), as fsspec's local file system reads it: a relative one is taken from
    the working directory, ``~`` is expanded; trailing slashes are dropped."""
    for prefix in ("file://", "file:", "local://", "local:"):
        if uri.startswith(prefix):
            uri = uri[len(prefix):]
            break
    if not uri.startswith("/"):
        uri = os.path.abspath(os.path.expanduser(uri))
    return uri.rstrip("/") or "/"
