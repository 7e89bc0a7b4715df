"""A ``Storage`` that passes every call on to another: the base of the wrappers that change
one or two operations (a job's recording storage, a catalog's locked commits)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, BinaryIO

from paimond.table.storage.output_stream import OutputStream
from paimond.table.storage.values import FileStatus, StorageLocation

if TYPE_CHECKING:
    from paimond.table.storage.interface import Storage


class DelegatingStorage:
    def __init__(self, inner: Storage) -> None:
        self._inner = inner
        self.root: str = inner.root

    @property
    def location(self) -> StorageLocation:
        """Where a worker reopens the storage: the inner one's location, as it is now (a
        catalog's data token is renewed)."""
        return self._inner.location

    @property
    def inner(self) -> Storage:
        """The storage this one passes its calls on to."""
        return self._inner

    def join(self, *parts: str) -> str:
        return self._inner.join(*parts)

    def read_bytes(self, path: str) -> bytes:
        return self._inner.read_bytes(path)

    def read_text(self, path: str) -> str:
        return self._inner.read_text(path)

    def open_input(self, path: str, *, buffered: bool = True,
                   size: int | None = None) -> BinaryIO:
        return self._inner.open_input(path, buffered=buffered, size=size)

    def open_output(self, path: str) -> OutputStream:
        return self._inner.open_output(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._inner.write_bytes(path, data)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        return self._inner.create_exclusive(path, data)

    def exists(self, path: str) -> bool:
        return self._inner.exists(path)

    def is_file(self, path: str) -> bool:
        return self._inner.is_file(path)

    def size(self, path: str) -> int:
        return self._inner.size(path)

    def list_dir(self, path: str) -> list[FileStatus]:
        return self._inner.list_dir(path)

    def delete(self, path: str) -> bool:
        return self._inner.delete(path)

    def delete_many(self, paths: Sequence[str],
                    on_deleted: Callable[[str], object] | None = None) -> None:
        self._inner.delete_many(paths, on_deleted)

    def delete_dir_if_empty(self, path: str) -> bool:
        return self._inner.delete_dir_if_empty(path)

    def mtime(self, path: str) -> float | None:
        return self._inner.mtime(path)
