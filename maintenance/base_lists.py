"""Which base manifest lists an expiration reads (issue #22: expiry linear in the snapshots).

Java's ``SnapshotDeletion`` reads the base manifest list of every expiring snapshot. A base
list names every live manifest, so on a table whose manifests are never merged the lists grow
with the history and reading them all costs the square of the snapshot count. Here only a few
are read, and the manifests deleted are the same:

A commit writes its base list from its predecessor's data manifests (Java
``FileStoreCommitImpl``, pypaimon's and paimond's committers): ``base(s)`` is ``base(s-1)``
followed by ``delta(s-1)``, unless the commit merged manifests (Java ``ManifestFileMerger``,
``merge-manifests``), which replaces some of them by manifests the commit wrote. Then:

- read ``base(begin)`` and every delta list;
- for each snapshot ``s`` after ``begin`` up to the end snapshot: if ``s-1`` is not there (a
  gap), or the Avro record count of ``base(s)`` (from the block headers, nothing
  decompressed) is not ``count(base(s-1)) + count(delta(s-1))``, or a count cannot be
  taken, read ``base(s)`` (unless ``s`` is the end snapshot, whose lists are read whole as
  kept) and the base list of the snapshot before ``s``.

Claim: a manifest ``M`` that Java deletes (named by some expiring ``base(s)`` and by nothing
kept) is named by a list read here, except in the case below. Follow ``M`` back from ``s``
through counted, consecutive snapshots: without a merge, ``M`` is in ``base(s-1)`` or in
``delta(s-1)`` (read); the walk ends at ``begin`` or at a read list (found), or at the
commit ``t`` that wrote ``M`` by a merge. Follow it forward: ``M`` is not in the end
snapshot's base list (that is kept), so some commit ``u <= end`` dropped it from the base
list by a merge; the base list before ``u`` names ``M`` and is read when that merge changed
the count or follows a gap. A merge at ``t`` that changed the count reads ``base(t)``. So
``M`` is missed only when both the merge that wrote it (``begin < t < end``) and the merge
that dropped it (``t < u <= end``) kept the number of manifests (a merge whose output rolls
into as many files as it read, e.g. two manifests just under ``manifest.target-file-size``,
or a full manifest compaction rewriting k manifests into k), with no counted change between
them. Such a manifest is left behind, unreferenced; ``remove-orphans`` deletes it
(``tests/maintenance/test_expire_base_lists.py`` builds that case).

Safety does not rest on this: every manifest deleted is named by an expiring list read here,
so it is one Java deletes, and the skipping sets (end snapshot, tags, branches) are read
whole. The end snapshot's base list is read by name and size only; when its uncompressed
records begin with the very bytes of a list read before under the same writer schema, those
records are that list's names, and only the rest is decoded.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Sequence
from typing import BinaryIO

from paimond.errors import CodecError, CorruptFileError, MissingFileError, PaimondError
from paimond.format.manifest_list import ManifestFileMeta
from paimond.format.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.layout import MANIFEST_DIR
from paimond.table.manifest_files import (
    ManifestListRecords,
    decode_manifest_list_names,
    manifest_list_names,
    manifest_list_records,
)
from paimond.table.scan import read_manifest_list

_MAGIC = b"Obj\x01"
_SYNC_SIZE = 16
_CHUNK_BYTES = 8192


class ManifestListCache:
    """Decoded manifest lists by file name (names are never reused, so an entry stays true):
    whole (``read``), or only the (name, size) of each manifest (``names``, for base lists).
    One expire run shares it between its rounds; ``retain`` bounds it between rounds."""

    def __init__(self) -> None:
        self._lists: dict[str, list[ManifestFileMeta]] = {}
        self._names: dict[str, list[tuple[str, int]]] = {}
        self._records: dict[str, ManifestListRecords] = {}
        self._sets: dict[str, frozenset[str]] = {}

    def read(self, table: Table, name: str, where: str) -> list[ManifestFileMeta]:
        found = self._lists.get(name)
        if found is None:
            found = self._lists[name] = read_manifest_list(table, name, where)
        return found

    def names(self, table: Table, name: str, where: str) -> list[tuple[str, int]]:
        """(file name, file size) of each manifest; MissingFileError and CorruptFileError as
        ``read_manifest_list``."""
        found = self._names.get(name)
        if found is None:
            whole = self._lists.get(name)
            found = self._names[name] = ([(m.file_name, m.file_size) for m in whole]
                                         if whole is not None else self._read_names(table, name, where))
        return found

    def name_set(self, table: Table, name: str, where: str) -> frozenset[str]:
        """The manifest names of ``names``, as a set (kept: subset tests cost C time)."""
        found = self._sets.get(name)
        if found is None:
            pairs = self.names(table, name, where)  # may derive the set from an earlier list's
            found = self._sets.get(name)
            if found is None:
                found = self._sets[name] = frozenset(n for n, _ in pairs)
        return found

    def _read_names(self, table: Table, name: str, where: str) -> list[tuple[str, int]]:
        """A base list usually begins with the records of an earlier one (``base(s)`` is
        ``base(s-1) + delta(s-1)``): when its uncompressed records begin with the very bytes of
        a list read before, under the same writer schema, those records decode to the same
        names, and only the rest is decoded."""
        path = table.file_path(MANIFEST_DIR, name)
        try:
            data = table.storage.read_bytes(path)
        except MissingFileError:
            raise MissingFileError(path, where) from None
        try:
            records = manifest_list_records(data)
            if records is None:
                return decode_manifest_list_names(data)
            names = None
            for earlier_name, earlier in self._records.items():
                if (earlier.schema == records.schema and len(earlier.records) <= len(records.records)
                        and records.records.startswith(earlier.records)):
                    head = self._names[earlier_name]
                    tail = manifest_list_names(records, len(earlier.records), len(head))
                    names = head + tail
                    if earlier_name in self._sets:
                        self._sets[name] = self._sets[earlier_name] | {n for n, _ in tail}
                    break
            if names is None:
                names = manifest_list_names(records)
            self._records[name] = records
            return names
        except CodecError as error:
            raise CorruptFileError(path, error.reason) from None

    def retain(self, names: Iterable[str]) -> None:
        keep = set(names)
        self._lists = {name: metas for name, metas in self._lists.items() if name in keep}
        self._names = {name: pairs for name, pairs in self._names.items() if name in keep}
        self._records = {name: data for name, data in self._records.items() if name in keep}
        self._sets = {name: names for name, names in self._sets.items() if name in keep}

    def __len__(self) -> int:
        return len(self._lists) + len(self._names)


class _Window:
    """Reads a stream at absolute positions through one buffered chunk."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream, self._start, self._buffer = stream, 0, b""

    def at(self, pos: int, size: int) -> tuple[bytes, int]:
        """A buffer and the offset of ``pos`` in it; fewer than ``size`` bytes only at EOF."""
        end = self._start + len(self._buffer)
        if not (self._start <= pos and pos + size <= end):
            self._stream.seek(pos)
            self._buffer, self._start = self._stream.read(max(size, _CHUNK_BYTES)), pos
        return self._buffer, pos - self._start

    def take(self, pos: int, size: int) -> bytes:
        buffer, offset = self.at(pos, size)
        if offset + size > len(buffer):
            raise CodecError(f"truncated Avro container: {size} bytes at {pos} run past the end")
        return buffer[offset:offset + size]

    def long(self, pos: int) -> tuple[int, int]:
        buffer, offset = self.at(pos, 10)
        n = shift = 0
        for i in range(offset, min(offset + 10, len(buffer))):
            b = buffer[i]
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return (n >> 1) ^ -(n & 1), pos + i - offset + 1
            shift += 7
        raise CodecError(f"malformed Avro container: bad varint at {pos}")


def count_avro_records(stream: BinaryIO) -> tuple[int, int]:
    """(records, bytes) of an Avro object container file, from its block headers: nothing is
    decompressed. Raises CodecError for a malformed container."""
    window = _Window(stream)
    if window.take(0, 4) != _MAGIC:
        raise CodecError("not an Avro object container file")
    pos = 4
    while True:  # the header's metadata map
        entries, pos = window.long(pos)
        if entries == 0:
            break
        if entries < 0:
            entries = -entries
            _, pos = window.long(pos)
        for _ in range(2 * entries):  # keys and values
            size, pos = window.long(pos)
            if size < 0:
                raise CodecError("malformed Avro container: negative metadata length")
            pos += size
    sync = window.take(pos, _SYNC_SIZE)
    pos += _SYNC_SIZE
    records = 0
    while True:
        buffer, offset = window.at(pos, 1)
        if offset >= len(buffer):
            return records, pos
        count, pos = window.long(pos)
        size, pos = window.long(pos)
        if count < 0 or size < 0:
            raise CodecError(f"malformed Avro block at {pos}")
        pos += size
        if window.take(pos, _SYNC_SIZE) != sync:
            raise CodecError(f"malformed Avro container: wrong sync marker at {pos}")
        pos += _SYNC_SIZE
        records += count


def count_list_entries(table: Table, name: str, expected_size: int | None) -> int | None:
    """How many manifests a manifest list names, from its block headers; None when it cannot
    be told (missing, malformed, or not the size its snapshot recorded). The file is read
    whole: one GET on an object store (a stream would cost a HEAD more), and locally no
    dearer than reading it by pieces."""
    try:
        data = table.storage.read_bytes(table.file_path(MANIFEST_DIR, name))
        records, size = count_avro_records(io.BytesIO(data))
    except (PaimondError, OSError):
        return None
    if expected_size is not None and size != expected_size:
        return None
    return records


def base_lists_to_read(table: Table, loaded: Sequence[Snapshot], end_id: int,
                       delta_entries: Callable[[Snapshot], int | None]) -> set[int]:
    """Ids of the expiring snapshots (``loaded``, ascending, those below ``end_id``) whose base
    list must be read (see the module). ``delta_entries`` counts a delta list, None if it
    cannot be read."""
    expiring = [s for s in loaded if s.id < end_id]
    if not expiring:
        return set()
    reads = {expiring[0].id}
    counts: dict[int, int | None] = {}

    def base_entries(snapshot: Snapshot) -> int | None:
        if snapshot.id not in counts:
            counts[snapshot.id] = count_list_entries(table, snapshot.base_manifest_list,
                                                     snapshot.base_manifest_list_size)
        return counts[snapshot.id]

    kept = [s for s in loaded if s.id == end_id]  # the end snapshot, unless it is gone
    for previous, snapshot in zip(expiring, expiring[1:] + kept, strict=False):
        if snapshot.id == previous.id + 1:
            before, delta = base_entries(previous), delta_entries(previous)
            after = base_entries(snapshot)
            if before is not None and delta is not None and after == before + delta:
                continue
        reads |= {previous.id, snapshot.id} - {end_id}
    return reads
