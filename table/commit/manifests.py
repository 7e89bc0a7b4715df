"""``Committer.compact_manifests``: Java's ``compactManifestOnce`` through the commit's attempt
loop: the latest base + delta manifests merged with forced settings become the base of a
COMPACT snapshot with an empty delta, checked to describe exactly the latest snapshot's live
files. A part of ``Committer`` (table/commit/committer.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar, cast

from paimond.faults import crash_point
from paimond.format.meta.manifest import ManifestEntry
from paimond.format.meta.manifest_list import ManifestFileMeta
from paimond.format.meta.schema import TableSchema
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.commit.manifest_files import ManifestWriter
from paimond.table.scan.snapshot_scan import merge_entries, read_manifest, read_manifest_list

T = TypeVar("T")


class ManifestsUnchanged:
    """What ``compact_manifests`` found: merging would change nothing, so nothing was committed."""


class ManifestCompaction:
    """``Committer``'s manifest compaction."""

    if TYPE_CHECKING:  # Committer's fields and the steps every attempt shares
        table: Table
        check_conflicts: bool

        def _retry(self, attempt: Callable[[], T | None]) -> T: ...
        def _writer(self, schema: TableSchema) -> ManifestWriter: ...
        def _publish(self, writer: ManifestWriter, snapshot: Snapshot) -> Snapshot | None: ...
        def _merged(self, writer: ManifestWriter, latest: Snapshot, schema: TableSchema,
                    metas: list[ManifestFileMeta], *, forced: bool,
                    read: Callable[[ManifestFileMeta], list[ManifestEntry]] | None = None
                    ) -> list[ManifestFileMeta]: ...
        def _manifest_compaction_snapshot(self, writer: ManifestWriter, latest: Snapshot,
                                          base_metas: list[ManifestFileMeta]) -> Snapshot: ...

    def compact_manifests(self, *, forced: bool = True) -> Snapshot | ManifestsUnchanged:
        """Rewrite the latest snapshot's manifests (Java ``compact_manifest``: ``forced``,
        else by the table's own merge thresholds) as a COMPACT snapshot with an empty delta;
        ``ManifestsUnchanged`` if merging changes nothing."""
        # mypy cannot solve T for a union; the attempt returns exactly this union or None.
        return cast("Snapshot | ManifestsUnchanged",
                    self._retry(lambda: self._try_compact_manifests_once(forced)))

    def _try_compact_manifests_once(self, forced: bool) -> Snapshot | ManifestsUnchanged | None:
        table = self.table
        latest = table.snapshots.latest()
        if latest is None:
            return ManifestsUnchanged()
        schema = table.latest_schema()
        writer = self._writer(schema)
        try:
            before = self._latest_manifests(latest)
            read = _once_each(self.table, self.table.snapshots.path(latest.id))
            after = self._merged(writer, latest, schema, before, forced=forced, read=read)
            if {m.file_name for m in after} == {m.file_name for m in before}:
                writer.remove_written()
                return ManifestsUnchanged()
            crash_point("commit.manifests_compacted")
            if self.check_conflicts:
                self._check_same_live_files(latest, before, after, read)
            snapshot = self._manifest_compaction_snapshot(writer, latest, after)
        except BaseException:
            writer.remove_written()
            raise
        return self._publish(writer, snapshot)

    def _latest_manifests(self, latest: Snapshot) -> list[ManifestFileMeta]:
        where = self.table.snapshots.path(latest.id)
        return (read_manifest_list(self.table, latest.base_manifest_list, where)
                + read_manifest_list(self.table, latest.delta_manifest_list, where))

    def _check_same_live_files(self, latest: Snapshot, previous: list[ManifestFileMeta],
                               metas: list[ManifestFileMeta],
                               read: Callable[[ManifestFileMeta], list[ManifestEntry]]) -> None:
        """Merged manifests must describe exactly the live files of ``latest`` (its
        ``previous`` manifests). Each manifest is read once for the merge and this check;
        the new ones are read back from storage."""
        where = self.table.snapshots.path(latest.id)
        before, after = ({f.entry.identifier for f in merge_entries(
            ((e, m.file_name) for m in group for e in read(m)), where)}
            for group in (previous, metas))
        if before != after:
            raise AssertionError(f"{self.table.name}: merged manifests describe "
                                 f"{len(after)} live files, snapshot {latest.id} has {len(before)}")

def _once_each(table: Table, where: str) -> Callable[[ManifestFileMeta], list[ManifestEntry]]:
    """A manifest reader that reads each manifest (immutable, uniquely named) at most once."""
    read: dict[str, list[ManifestEntry]] = {}

    def once(meta: ManifestFileMeta) -> list[ManifestEntry]:
        if meta.file_name not in read:
            read[meta.file_name] = read_manifest(table, meta, where)
        return read[meta.file_name]
    return once
