"""The snapshot a tag made by hand pins: Java ``AbstractFileStoreTable.findSnapshot`` (a live
snapshot, else the snapshot a tag holds), the latest snapshot, and
``CreateTagFromTimestampProcedure``'s search (apache/paimon release-2.0.0).

A snapshot that expired but is held by a tag can be tagged again: the tag holding it keeps its
files. Whoever writes such a tag checks afterwards that its source (the snapshot file, or the
tag holding the snapshot) is still there, as tag creation does for live snapshots: a tag
deletion that started earlier reads the references again after deleting its tag file, so it
sees the new tag, unless its tag file was gone before the new tag was written (then the
check fails and the writer withdraws).
"""

from __future__ import annotations

from dataclasses import dataclass

from paimond.errors import MissingFileError
from paimond.format.meta.snapshot import Snapshot
from paimond.table.catalog import Table
from paimond.table.tags import list_tags, read_tag
from paimond.table.watermarks import later_or_equal_watermark


@dataclass(frozen=True, slots=True)
class TagSource:
    """A snapshot to tag and where it was found: its snapshot file, or the tag ``tag``."""

    snapshot: Snapshot
    tag: str | None = None  # None: a live snapshot

    def describe(self) -> str:
        where = "" if self.tag is None else f" (held by tag {self.tag!r})"
        return f"snapshot {self.snapshot.id}{where}"


def find_snapshot(table: Table, snapshot_id: int) -> TagSource | None:
    """Java ``findSnapshot``: the live snapshot ``snapshot_id``, else the snapshot of that id a
    tag holds (the tag of the smallest name), else None."""
    try:
        return TagSource(table.snapshots.load(snapshot_id))
    except MissingFileError:
        pass
    for tag in sorted(list_tags(table), key=lambda t: (t.snapshot.id, t.name)):
        if tag.snapshot.id == snapshot_id:
            return TagSource(tag.snapshot, tag.name)
    return None


def latest_snapshot(table: Table) -> TagSource | None:
    snapshot_id = table.snapshots.latest_id()
    return None if snapshot_id is None else find_snapshot(table, snapshot_id)


def _later_or_equal(table: Table, timestamp_ms: int) -> Snapshot | None:
    """Java ``SnapshotManager.laterOrEqualTimeMills``: a binary search over the live snapshots
    (commit times grow with ids) for the earliest whose commit time is at least
    ``timestamp_ms``; an exact match ends the search."""
    snapshots = table.snapshots
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    if earliest is None or latest is None:
        return None
    if snapshots.load(latest).time_millis < timestamp_ms:
        return None
    found = None
    while earliest <= latest:
        middle = earliest + (latest - earliest) // 2
        snapshot = snapshots.load(middle)
        if snapshot.time_millis > timestamp_ms:
            latest, found = middle - 1, snapshot
        elif snapshot.time_millis < timestamp_ms:
            earliest = middle + 1
        else:
            return snapshot
    return found


def at_or_after(table: Table, timestamp_ms: int) -> TagSource | None:
    """Java ``create_tag_from_timestamp``: the live snapshot found by
    :func:`_later_or_equal`, unless the first tag (by snapshot id) whose snapshot was committed
    at or after ``timestamp_ms`` holds an earlier-committed one (snapshots expired since)."""
    snapshot = _later_or_equal(table, timestamp_ms)
    source = None if snapshot is None else TagSource(snapshot)
    for tag in sorted(list_tags(table), key=lambda t: (t.snapshot.id, t.name)):
        if timestamp_ms <= tag.snapshot.time_millis:
            if snapshot is None or tag.snapshot.time_millis < snapshot.time_millis:
                source = TagSource(tag.snapshot, tag.name)
            break
    return source


def at_or_after_watermark(table: Table, watermark: int) -> TagSource | None:
    """Java ``create_tag_from_watermark``: the snapshot ``later_or_equal_watermark`` finds,
    unless the first tag (by snapshot id) whose watermark is at least ``watermark`` holds one
    with a smaller watermark (snapshots expired since)."""
    snapshot = later_or_equal_watermark(table.snapshots, watermark)
    source = None if snapshot is None else TagSource(snapshot)
    for tag in sorted(list_tags(table), key=lambda t: (t.snapshot.id, t.name)):
        tagged = tag.snapshot.watermark
        if tagged is not None and watermark <= tagged:
            if snapshot is None or snapshot.watermark is None or tagged < snapshot.watermark:
                source = TagSource(tag.snapshot, tag.name)
            break
    return source


def still_there(table: Table, source: TagSource) -> bool:
    """Whether ``source`` still holds its snapshot (checked after writing a tag of it)."""
    if source.tag is None:
        return table.snapshots.exists(source.snapshot.id)
    tag = read_tag(table, source.tag)
    return tag is not None and tag.snapshot.id == source.snapshot.id
