"""Snapshot files and the EARLIEST/LATEST hints: Java ``SnapshotManager`` and ``HintFileUtils``.

Hints are advisory. ``latest_id`` trusts ``LATEST`` only when ``snapshot-<hint>`` exists and
``snapshot-<hint+1>`` does not (Java's check, plus pypaimon's refusal of a hint naming a
missing snapshot); otherwise it lists the directory. ``earliest_id`` trusts ``EARLIEST`` only
when that snapshot exists.
"""

from __future__ import annotations

from paimond.errors import CodecError, CorruptFileError, MissingFileError
from paimond.format.meta.snapshot import Snapshot, decode_snapshot
from paimond.table.layout import EARLIEST_HINT, LATEST_HINT, SNAPSHOT_DIR, SNAPSHOT_PREFIX
from paimond.table.storage.interface import Storage


def parse_numbered_name(name: str, prefix: str) -> int | None:
    """``snapshot-12`` -> 12; anything else (hints, temp files) -> None."""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix):]
    return int(digits) if digits.isdigit() else None


class Snapshots:
    """The snapshots of one table (or of one branch, or the changelogs, by directory/prefix)."""

    def __init__(self, storage: Storage, table_path: str, *, directory: str = SNAPSHOT_DIR,
                 prefix: str = SNAPSHOT_PREFIX) -> None:
        self.storage = storage
        self.directory = storage.join(table_path, directory)
        self.prefix = prefix

    def path(self, snapshot_id: int) -> str:
        return self.storage.join(self.directory, f"{self.prefix}{snapshot_id}")

    def hint_path(self, hint: str) -> str:
        return self.storage.join(self.directory, hint)

    def exists(self, snapshot_id: int) -> bool:
        return self.storage.is_file(self.path(snapshot_id))

    def list_ids(self) -> list[int]:
        """Ids of every snapshot file present, ascending."""
        ids = (parse_numbered_name(s.name, self.prefix) for s in self.storage.list_dir(self.directory)
               if not s.is_dir)
        return sorted(i for i in ids if i is not None)

    def read_hint(self, hint: str) -> int | None:
        """The id in a hint file, or None if it is absent or unreadable (hints are advisory)."""
        try:
            text = self.storage.read_text(self.hint_path(hint)).strip()
        except MissingFileError:
            return None
        return int(text) if text.isdigit() else None

    def latest_id(self) -> int | None:
        return self._latest_id(self.read_hint(LATEST_HINT))

    def _latest_id(self, hint: int | None) -> int | None:
        if hint is not None and hint > 0 and self.exists(hint) and not self.exists(hint + 1):
            return hint
        ids = self.list_ids()
        return ids[-1] if ids else None

    def latest_id_since(self, known: int | None) -> int | None:
        """``latest_id`` for a watcher that found ``known`` the last time: while ``LATEST``
        still names it, that one read is the answer (ids only grow, and a writer updates the
        hint after each snapshot it commits); else the full check. Only a writer that died
        between its snapshot and the hint leaves this behind, until the next commit or the
        watcher's next full check (``Table.watched_latest_id``)."""
        hint = self.read_hint(LATEST_HINT)
        if known is not None and hint == known:
            return known
        return self._latest_id(hint)

    def earliest_id(self) -> int | None:
        hint = self.read_hint(EARLIEST_HINT)
        if hint is not None and self.exists(hint):
            return hint
        ids = self.list_ids()
        return ids[0] if ids else None

    def load(self, snapshot_id: int) -> Snapshot:
        path = self.path(snapshot_id)
        data = self.storage.read_bytes(path)
        try:
            snapshot = decode_snapshot(data)
        except CodecError as error:
            raise CorruptFileError(path, error.reason) from None
        if snapshot.id != snapshot_id:
            raise CorruptFileError(path, f"holds snapshot id {snapshot.id}, expected {snapshot_id}")
        return snapshot

    def latest(self) -> Snapshot | None:
        snapshot_id = self.latest_id()
        return None if snapshot_id is None else self.load(snapshot_id)
