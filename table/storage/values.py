"""The plain values of the storage interface (table/storage/interface.py): where storage is, as picklable
data a worker reopens it from (``StorageLocation``), and what a listing gives (``FileStatus``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from paimond.table.storage.interface import Storage


@dataclass(frozen=True, slots=True)
class FileStatus:
    path: str
    name: str
    size_bytes: int
    mtime_s: float | None
    is_dir: bool


# Options that are credentials: hidden when shown, left out of what ships to remote workers.
CREDENTIAL_OPTIONS = frozenset({"key", "access_key_id", "secret", "secret_access_key", "token",
                                "session_token", "password"})


@dataclass(frozen=True, slots=True)
class StorageLocation:
    """Where storage is: its root URI and options, as picklable data. A worker (a process
    pool, a Spark executor) reopens the same storage from it; ``repr`` hides credentials.
    ``vended``: the credentials are a catalog's short-lived data token, which a remote worker
    cannot find itself, so they ship with its task."""

    root: str
    options: Mapping[str, Any] = field(default_factory=dict)
    vended: bool = False

    def __repr__(self) -> str:
        shown = {k: ("***" if k in CREDENTIAL_OPTIONS else v) for k, v in self.options.items()}
        return f"StorageLocation(root={self.root!r}, options={shown!r})"

    def open(self) -> Storage:
        from paimond.table.storage.interface import open_storage  # which imports this module

        return open_storage(self.root, self.options)

    def without_options(self, names: Collection[str]) -> StorageLocation:
        """The same location without ``names`` (credentials a remote worker finds itself);
        a vended location keeps its options whole."""
        if self.vended:
            return self
        return StorageLocation(self.root, {k: v for k, v in self.options.items()
                                           if k not in names})
