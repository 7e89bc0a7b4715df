"""Which base manifest lists an expiration reads (expiry linear in the snapshots).

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

from collections.abc import Callable, Iterable, Sequence

from paimond.errors import CodecError, CorruptFileError, MissingFileError, PaimondError
from paimond.format.meta.avro_container import count_records
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.commit.manifest_files import (
    ManifestListRecords,
    decode_manifest_list_names,
    manifest_list_names,
    manifest_list_records,
)
from paimond.table.layout import MANIFEST_DIR
from paimond.table.scan.snapshot_scan import read_manifest_list


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


def count_list_entries(table: Table, name: str, expected_size: int | None) -> int | None:
    """How many manifests a manifest list names, from its block headers; None when it cannot
    be told (missing, malformed, or not the size its snapshot recorded). The file is read
    whole: one GET on an object store (a stream would cost a HEAD more), and locally no
    dearer than reading it by pieces."""
    try:
        data = table.storage.read_bytes(table.file_path(MANIFEST_DIR, name))
        records = count_records(data)
    except (PaimondError, OSError):
        return None
    if expected_size is not None and len(data) != expected_size:
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
