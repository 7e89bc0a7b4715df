"""A new file being written through a ``Storage`` (table/storage/interface.py): the stream protocol, and
the one implementation over a file object that publishing or discarding finishes.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, suppress
from typing import Any, Protocol


class OutputStream(Protocol):
    """A new file being written: ``close`` publishes it, ``abort`` discards it (both
    idempotent, the first one wins). As a context manager, an exception aborts."""

    @property
    def closed(self) -> bool: ...
    def write(self, data: bytes | bytearray | memoryview) -> int: ...
    def tell(self) -> int: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def __enter__(self) -> OutputStream: ...
    def __exit__(self, kind: object, error: object, trace: object) -> None: ...


class Output:
    """An ``OutputStream`` over a file object that ``publish`` or ``discard`` finishes;
    failures are translated as in every ``Storage`` call. A failed publish discards, and an
    output dropped unfinished is discarded, never published. ``write_back``, if given, runs
    after each ``flush`` (a local file: start writing the flushed bytes to disk)."""

    def __init__(self, file: Any, publish: Callable[[], object], discard: Callable[[], object],
                 errors: Callable[[], AbstractContextManager[None]],
                 write_back: Callable[[], object] | None = None) -> None:
        self._file, self._publish, self._discard, self._errors = file, publish, discard, errors
        self._write_back = write_back
        self._finished = False

    @property
    def closed(self) -> bool:
        return self._finished

    def seekable(self) -> bool:  # fastavro asks
        return False

    def write(self, data: bytes | bytearray | memoryview) -> int:
        with self._errors():
            return int(self._file.write(data))

    def tell(self) -> int:
        return int(self._file.tell())

    def flush(self) -> None:
        with self._errors():
            self._file.flush()
            if self._write_back is not None:
                self._write_back()

    def close(self) -> None:
        if self._finished:
            return
        try:
            with self._errors():
                self._publish()
        except BaseException:
            self.abort()
            raise
        self._finished = True

    def abort(self) -> None:
        if self._finished:
            return
        self._finished = True
        with suppress(Exception):  # best effort: orphan removal deletes what stays behind
            self._discard()

    def __enter__(self) -> Output:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()

    def __del__(self) -> None:
        if not getattr(self, "_finished", True):
            self.abort()
