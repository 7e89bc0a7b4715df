"""Finding a snapshot by its watermark: Java ``SnapshotManager.earlierOrEqualWatermark`` and
``laterOrEqualWatermark`` (apache/paimon 5dacde516b), behind Paimon's ``rollback_to_watermark``
and ``create_tag_from_watermark`` procedures.

Both are binary searches over the live snapshots, from the first one that has a watermark (a
snapshot without one, or with ``Long.MIN_VALUE``, has none) to the latest, assuming watermarks
grow with ids. A snapshot without a watermark stands at the position of the nearest earlier
one in the window that has one. An exact match ends the search; otherwise the earlier-or-equal
search keeps the last snapshot below the watermark it passed, the later-or-equal search the
last one above it.
"""

from __future__ import annotations

from paimond.format.meta.snapshot import Snapshot
from paimond.table.snapshots import Snapshots

_LONG_MIN = -(2 ** 63)


def _missing(watermark: int | None) -> bool:
    return watermark is None or watermark == _LONG_MIN


def _window(snapshots: Snapshots) -> tuple[int, int, Snapshot] | None:
    """The ids of the first snapshot with a watermark and of the latest, and that first one."""
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    if earliest is None or latest is None:
        return None
    first = snapshots.load(earliest)
    while _missing(first.watermark) and earliest < latest:
        earliest += 1
        first = snapshots.load(earliest)
    if _missing(first.watermark):
        return None
    return earliest, latest, first


def _positioned(snapshots: Snapshots, middle: int, earliest: int) -> tuple[int, Snapshot]:
    """The snapshot standing at ``middle``: the nearest at or before it with a watermark."""
    position, snapshot = middle, snapshots.load(middle)
    while _missing(snapshot.watermark) and position > earliest:
        position -= 1
        snapshot = snapshots.load(position)
    return position, snapshot


def _search(snapshots: Snapshots, watermark: int, *, later: bool) -> Snapshot | None:
    window = _window(snapshots)
    if window is None:
        return None
    earliest, latest, first = window
    assert first.watermark is not None
    if later and first.watermark >= watermark:
        return first
    if not later and first.watermark > watermark:
        return None
    found = None
    while earliest <= latest:
        middle = earliest + (latest - earliest) // 2
        position, snapshot = _positioned(snapshots, middle, earliest)
        if _missing(snapshot.watermark):
            earliest = middle + 1
            continue
        assert snapshot.watermark is not None
        if snapshot.watermark == watermark:
            return snapshot
        if snapshot.watermark > watermark:
            latest = position - 1
            found = snapshot if later else found
        else:
            earliest = middle + 1
            found = found if later else snapshot
    return found


def earlier_or_equal_watermark(snapshots: Snapshots, watermark: int) -> Snapshot | None:
    """The latest snapshot whose watermark is at most ``watermark`` (None: there is none)."""
    return _search(snapshots, watermark, later=False)


def later_or_equal_watermark(snapshots: Snapshots, watermark: int) -> Snapshot | None:
    """The earliest snapshot whose watermark is at least ``watermark`` (None: there is none)."""
    return _search(snapshots, watermark, later=True)
