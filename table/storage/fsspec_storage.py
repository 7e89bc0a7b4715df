"""``Storage`` (table/storage/interface.py) over fsspec: S3 through s3fs, memory://, and any other fsspec
file system; local files through ``os`` (table/storage/local_files.py), without fsspec. Java
counterparts: ``LocalFileIO``, the S3 FileIO, and the atomic step of ``RenamingSnapshotCommit``:
a hard link locally, a conditional PUT (``If-None-Match: *``) on S3.
"""

from __future__ import annotations

import errno
import inspect
import io
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from typing import Any, BinaryIO, cast

from paimond.errors import (
    CorruptFileError,
    MissingFileError,
    StorageUnavailableError,
    UnsupportedError,
)
from paimond.table.storage.local_files import (
    create_file_exclusive,
    discard_temp,
    list_directory,
    local_uri_path,
    open_temp_beside,
    publish_temp,
    replace_file,
    start_writeback,
)
from paimond.table.storage.output_stream import Output, OutputStream
from paimond.table.storage.s3_options import s3_error_code
from paimond.table.storage.values import FileStatus, StorageLocation

_READ_BLOCK_BYTES = 8 * 2**20
_UPLOAD_PART_BYTES = 16 * 2**20  # S3 multipart part size: what a streamed upload buffers
_DELETE_BATCH = 1000  # keys per S3 DeleteObjects request, its limit
_CONFLICT_ATTEMPTS = 5  # S3 409 ConditionalRequestConflict: a concurrent conditional PUT
_MEMORY_CREATE_LOCK = threading.Lock()  # memory:// lives in this process only
_LOCAL_ROOTS_SEEN: set[str] = set()  # local roots this process saw: never created again


def _one_get(fs: Any) -> dict[str, int]:
    """What makes s3fs's ``cat_file`` one GET. From 2026.3.0 it asks for the size first (a
    HEAD) whenever ``max_concurrency`` > 1, its default being 10, so as to read objects larger
    than a block in concurrent ranges; metadata objects are small, so read them in one
    request. Earlier versions take no ``max_concurrency`` and send one GET anyway."""
    takes = "max_concurrency" in inspect.signature(fs._cat_file).parameters
    return {"max_concurrency": 1} if takes else {}


class FsspecStorage:
    """A ``Storage`` over one fsspec file system, with listing caches off so that a file
    another process wrote is seen at once."""

    __slots__ = ("_cat_options", "_fs", "_kind", "_prefix", "_root_path", "_secrets", "_unavailable",
                 "location", "root")

    def __init__(
        self,
        fs: Any,
        kind: str,
        prefix: str,
        root_path: str,
        secrets: frozenset[str],
        unavailable: tuple[type[BaseException], ...] = (OSError,),
    ) -> None:
        self._fs = fs
        self._kind = kind
        self._prefix = prefix
        self._root_path = root_path.rstrip("/") or "/"
        self._secrets = secrets
        self._unavailable = unavailable
        self._cat_options = _one_get(fs) if kind == "s3" else {}
        self.root = prefix + self._root_path
        self.location = StorageLocation(self.root)  # open_storage sets the options

    def __repr__(self) -> str:
        return f"FsspecStorage(root={self.root!r})"

    def join(self, *parts: str) -> str:
        """Join onto ``parts[0]`` if it is absolute (a URI or ``/path``), else onto the root."""
        if parts and ("://" in parts[0] or parts[0].startswith(("/", "file:"))):
            base, rest = self._uri(self._path(parts[0])), parts[1:]
        else:
            base, rest = self.root, parts
        tail = "/".join(p.strip("/") for p in rest if p.strip("/"))
        return f"{base.rstrip('/')}/{tail}" if tail else base

    def read_bytes(self, path: str) -> bytes:
        p = self._path(path)
        with self._errors(p):
            if self._kind == "local":
                with open(p, "rb") as f:
                    return f.read()
            return cast(bytes, self._fs.cat_file(p, **self._cat_options))

    def read_text(self, path: str) -> str:
        data = self.read_bytes(path)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptFileError(self._uri(self._path(path)), f"not UTF-8: {e}") from e

    def open_input(self, path: str, *, buffered: bool = True,
                   size: int | None = None) -> BinaryIO:
        """A seekable binary stream; errors while reading it are not translated.

        ``buffered=False`` is for readers that read in large pieces of their own at several
        places in turn (Parquet's column chunks): on object stores each read is then one
        ranged GET, where a read-ahead window would be refetched at every switch. ``size``:
        the file's size when the caller knows it (a data file's manifest entry); on S3 the
        stream then needs no HEAD before its first GET."""
        p = self._path(path)
        with self._errors(p):
            if self._kind == "local":
                return open(p, "rb")
            extra: dict[str, Any] = {} if buffered else {"cache_type": "none"}
            if size is not None and self._kind == "s3":
                extra["size"] = size
            return cast(BinaryIO, self._fs.open(p, "rb", block_size=_READ_BLOCK_BYTES, **extra))

    def open_output(self, path: str) -> OutputStream:
        """A stream that writes ``path`` without holding the file in memory. Readers see the
        file only once ``close`` returns: locally a temp file beside it is renamed into place,
        on S3 a multipart upload (parts of ``_UPLOAD_PART_BYTES``) is completed, on memory://
        a buffer is stored; other file systems publish as their fsspec writer does."""
        p = self._path(path)
        errors = partial(self._errors, p)
        with self._errors(p):
            if self._kind == "local":
                self._local_parent(p)
                file, temp = open_temp_beside(p)
                return Output(file, partial(publish_temp, file, temp, p),
                               partial(discard_temp, file, temp), errors,
                               partial(start_writeback, file))
            if self._kind == "memory":
                buffer = io.BytesIO()
                return Output(buffer, lambda: self._fs.pipe_file(p, buffer.getvalue()),
                               buffer.close, errors)
            block = {"block_size": _UPLOAD_PART_BYTES} if self._kind == "s3" else {}
            remote = self._fs.open(p, "wb", **block)
            return Output(remote, remote.close, partial(self._discard, remote, p), errors)

    def _discard(self, remote: Any, p: str) -> None:
        """Abandon an fsspec writer: S3 aborts the multipart upload. Marked closed, since
        fsspec's finalizer would otherwise close, and so publish, the partial file."""
        discard = getattr(remote, "discard", None)
        if discard is not None:
            discard()
        remote.closed = True
        if self._kind != "s3" and self._fs.exists(p):  # a writer that created it early
            self._fs.rm_file(p)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Overwrite ``path``; readers see the old or the new content, never a mix, locally
        (temp file + rename) and on S3 (a PUT is atomic)."""
        p = self._path(path)
        with self._errors(p):
            if self._kind == "local":
                self._local_parent(p)
                replace_file(p, data)
            else:
                self._fs.pipe_file(p, data)
                self._fs.invalidate_cache(p)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create ``path`` holding ``data`` unless it exists; True if this call created it.

        The file appears complete or not at all (except on local file systems without hard
        links). On S3, if a lost response made botocore resend the PUT, the resend sees our
        own object and this returns False: callers that must know (the commit) compare the
        content, as Paimon's ``RenamingSnapshotCommit`` does.
        """
        p = self._path(path)
        with self._errors(p):
            if self._kind == "local":
                self._local_parent(p)
                return create_file_exclusive(p, data)
            if self._kind == "s3":
                return self._create_s3(p, data)
            if self._kind == "memory":
                with _MEMORY_CREATE_LOCK:
                    if self._fs.exists(p):
                        return False
                    self._fs.pipe_file(p, data)
                    return True
            if self._kind == "azure":  # a Put Blob with If-None-Match: *
                try:
                    self._fs.pipe_file(p, data, overwrite=False)
                except FileExistsError:
                    return False
                return True
        raise UnsupportedError(f"exclusive create on {self._prefix}", self._uri(p))

    def exists(self, path: str) -> bool:
        p = self._path(path)
        with self._errors(p):
            if self._kind == "local":
                found = os.path.exists(p)
                if found and p == self._root_path:
                    _LOCAL_ROOTS_SEEN.add(p)
                return found
            if self._kind == "s3" and "/" not in p:  # s3fs.exists hides errors for buckets
                try:
                    self._fs.call_s3("head_bucket", Bucket=p)
                except FileNotFoundError:
                    return False
                return True
            return bool(self._fs.exists(p))

    def is_file(self, path: str) -> bool:
        """A file (an object) is at ``path``. Unlike ``exists``, which must also find a
        directory, on S3 this is one HEAD: s3fs's ``exists`` of a missing key lists too."""
        p = self._path(path)
        with self._errors(p):
            if self._kind == "local":
                return os.path.isfile(p)
            if self._kind == "s3":
                bucket, key, _ = self._fs.split_path(p)
                try:
                    self._fs.call_s3("head_object", Bucket=bucket, Key=key)
                except FileNotFoundError:
                    return False
                return True
            return bool(self._fs.isfile(p))

    def size(self, path: str) -> int:
        return self._status(path).size_bytes

    def mtime(self, path: str) -> float | None:
        return self._status(path).mtime_s

    def list_dir(self, path: str) -> list[FileStatus]:
        p = self._path(path)
        try:
            with self._errors(p):
                if self._kind == "local":
                    return self._list_local(p)
                infos = self._list(p)
        except MissingFileError:
            return []
        children: dict[str, FileStatus] = {}
        for status in map(self._file_status, infos):
            known = children.get(status.name)
            if status.path != self._uri(p) and (known is None or status.is_dir > known.is_dir):
                children[status.name] = status  # a ``dir/`` marker and its prefix: one dir
        return sorted(children.values(), key=lambda s: s.name)

    def _list_local(self, p: str) -> list[FileStatus]:
        try:
            entries = list_directory(p)
        except NotADirectoryError:
            return []  # a file has no children
        base = p.rstrip("/")
        return sorted((self._local_status(f"{base}/{name}", status) for name, status in entries),
                      key=lambda s: s.name)

    def _local_status(self, p: str, status: os.stat_result) -> FileStatus:
        is_dir = stat.S_ISDIR(status.st_mode)
        return FileStatus(path=self._uri(p), name=p.rsplit("/", 1)[-1],
                          size_bytes=0 if is_dir else status.st_size, mtime_s=status.st_mtime,
                          is_dir=is_dir)

    def _list(self, p: str) -> list[dict[str, Any]]:
        if self._kind == "s3" and "/" in p:
            # One LIST: s3fs's ls lists the parent as well when a folder is empty or missing
            # (to find a file of that name), which list_dir answers with [] anyway.
            from fsspec.asyn import sync

            return cast(list[dict[str, Any]], sync(self._fs.loop, self._fs._lsdir, p, refresh=True))
        return cast(list[dict[str, Any]], self._fs.ls(p, detail=True, refresh=True))

    def delete(self, path: str) -> bool:
        """False if no file was at ``path``. On object stores the answer comes from a HEAD just
        before the DELETE, since S3 deletes of absent keys succeed silently."""
        p = self._path(path)
        with self._errors(p):
            if self._kind == "local":
                try:
                    os.remove(p)
                except FileNotFoundError:
                    return False
                return True
            try:
                if self._fs.info(p)["type"] != "file":
                    return False
            except FileNotFoundError:
                return False
            self._fs.rm_file(p)
            self._fs.invalidate_cache(p)
            return True

    def delete_many(self, paths: Sequence[str],
                    on_deleted: Callable[[str], object] | None = None) -> None:
        """Delete the files at ``paths``, asking nothing first (an absent one is no error):
        locally one by one, in order; on S3 in DeleteObjects requests of up to 1,000 keys of
        one bucket, in order. ``on_deleted(path)`` follows each path's deletion."""
        done = on_deleted or (lambda _: None)
        if self._kind != "s3":
            for path in paths:
                p = self._path(path)
                with self._errors(p), suppress(FileNotFoundError):
                    if self._kind == "local":
                        os.remove(p)
                    else:
                        self._fs.rm_file(p)
                done(path)
            return
        batch: list[tuple[str, str]] = []  # (path, key) of one bucket
        bucket = ""
        for path in paths:
            next_bucket, key, _ = self._fs.split_path(self._path(path))
            if batch and (next_bucket != bucket or len(batch) == _DELETE_BATCH):
                self._delete_objects(bucket, batch, done)
                batch = []
            bucket = next_bucket
            batch.append((path, key))
        if batch:
            self._delete_objects(bucket, batch, done)

    def _delete_objects(self, bucket: str, batch: list[tuple[str, str]],
                        done: Callable[[str], object]) -> None:
        first = self._path(batch[0][0])
        with self._errors(first):
            answer = self._fs.call_s3("delete_objects", Bucket=bucket, Delete={
                "Objects": [{"Key": key} for _, key in batch], "Quiet": True})
        for path, _ in batch:
            self._fs.invalidate_cache(self._path(path))
        failed = answer.get("Errors") or []
        if failed:  # per-key refusals (access denied...): the store's answer, not ours
            error = failed[0]
            raise StorageUnavailableError(self._uri(f"{bucket}/{error.get('Key')}"),
                                          f"{error.get('Code')}: {error.get('Message')} "
                                          f"({len(failed)} keys not deleted)")
        for path, _ in batch:
            done(path)

    def delete_dir_if_empty(self, path: str) -> bool:
        """True if an empty directory was removed. On S3, directories exist only through
        their children, so this removes at most a ``dir/`` marker object."""
        p = self._path(path)
        with self._errors(p):
            if self._kind == "s3":
                bucket, key, _ = self._fs.split_path(p)
                if not key:
                    return False
                # One LIST of the keys under ``key/``, the marker first if there is one (it
                # sorts first); s3fs strips the trailing slash from paths, so call S3 directly.
                answer = self._fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=f"{key}/",
                                          MaxKeys=2)
                if [o["Key"] for o in answer.get("Contents") or []] != [f"{key}/"]:
                    return False
                self._fs.call_s3("delete_object", Bucket=bucket, Key=f"{key}/")
                self._fs.invalidate_cache(p)
                return True
            try:
                if self._kind == "local":
                    os.rmdir(p)
                else:
                    self._fs.rmdir(p)
            except FileNotFoundError:
                return False
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    return False
                raise
            return True

    def _create_s3(self, p: str, data: bytes) -> bool:
        for attempt in range(_CONFLICT_ATTEMPTS):
            try:
                self._fs.pipe_file(p, data, mode="create")  # PutObject with IfNoneMatch="*"
                return True
            except FileExistsError:
                return False  # 412 PreconditionFailed, Condition: If-None-Match
            except OSError as e:
                code, status = s3_error_code(e)
                if code == "PreconditionFailed" or status == 412:
                    return False  # a server that omits <Condition> in the 412
                if code != "ConditionalRequestConflict" or attempt + 1 == _CONFLICT_ATTEMPTS:
                    raise
                time.sleep(0.05 * 2**attempt)  # the other PUT is in flight: ask again
            finally:
                self._fs.invalidate_cache(p)
        raise AssertionError("unreachable")

    def _status(self, path: str) -> FileStatus:
        p = self._path(path)
        with self._errors(p):
            if self._kind == "local":
                return self._local_status(p, os.stat(p))
            return self._file_status(self._fs.info(p))

    def _file_status(self, info: Mapping[str, Any]) -> FileStatus:
        name = str(info["name"]).rstrip("/")
        is_dir = info.get("type") == "directory" or str(info["name"]).endswith("/")
        raw = info.get("mtime", info.get("LastModified", info.get("last_modified",
                                                                  info.get("created"))))
        mtime_s = raw.timestamp() if hasattr(raw, "timestamp") else raw and float(raw)
        return FileStatus(
            path=self._uri(name),
            name=name.rsplit("/", 1)[-1],
            size_bytes=0 if is_dir else int(info.get("size") or 0),
            mtime_s=mtime_s,
            is_dir=is_dir,
        )

    def _path(self, path: str) -> str:
        """A full URI or root-relative path -> the path this fsspec file system takes."""
        if "://" in path or (self._kind == "local" and path.startswith(("file:", "local:"))):
            scheme = path.split(":", 1)[0]
            protocol = ("file", "local") if self._kind == "local" else self._fs.protocol
            if scheme not in ((protocol,) if isinstance(protocol, str) else protocol):
                raise UnsupportedError(f"a {scheme} path in storage at {self.root}", path)
            if self._kind == "local":
                return local_uri_path(path)
            return cast(str, self._fs._strip_protocol(path)).rstrip("/") or "/"
        if self._kind == "local" and os.path.isabs(path):
            return os.path.normpath(path)
        rel = path.strip("/")
        return f"{self._root_path.rstrip('/')}/{rel}" if rel else self._root_path

    def _uri(self, fs_path: str) -> str:
        return self._prefix + fs_path

    def _local_parent(self, p: str) -> None:
        """Create the missing parent directories of ``p``, never the root once this process saw
        it (any storage on it): a warehouse moved away or deleted is not created again, empty,
        in its place (FileNotFoundError, which names ``p``). A root never seen yet may be a new
        one. Below the root each directory is made on its own (``mkdir``, not ``makedirs``), so
        a root that goes while they are made fails the next one instead of coming back."""
        parent = os.path.dirname(p)
        seen = self._root_path in _LOCAL_ROOTS_SEEN  # before looking: seen, then not there
        if os.path.isdir(parent):
            _LOCAL_ROOTS_SEEN.add(self._root_path)
            return
        if not os.path.isdir(self._root_path):
            if seen:
                raise FileNotFoundError(f"the storage root {self._root_path} is gone")
            os.makedirs(self._root_path, exist_ok=True)  # a new warehouse
        _LOCAL_ROOTS_SEEN.add(self._root_path)
        relative = os.path.relpath(parent, self._root_path)
        if relative.startswith(os.pardir):  # outside the root: nothing to protect
            os.makedirs(parent, exist_ok=True)
            return
        current = self._root_path
        for part in relative.split(os.sep):
            current = os.path.join(current, part)
            try:
                os.mkdir(current)
            except FileExistsError:
                pass

    @contextmanager
    def _errors(self, fs_path: str) -> Iterator[None]:
        """Translate a missing file and an unreachable store into paimond errors that name
        the full URI; messages are scrubbed of credentials."""
        try:
            yield
        except (FileNotFoundError, MissingFileError) as e:
            raise MissingFileError(self._uri(fs_path)) from e
        except (IsADirectoryError, NotADirectoryError, FileExistsError):
            raise
        except self._unavailable as e:
            reason = f"{type(e).__name__}: {e}"
            for secret in self._secrets:
                reason = reason.replace(secret, "***")
            raise StorageUnavailableError(self._uri(fs_path), reason) from e
