"""Planning tags, pure: Java ``TagAutoCreation.tryToCreateTags`` and its restore, and
``TagTimeExpire.expire`` (apache/paimon 5dacde516b), over snapshot times and tag names given as
data; ``maintenance/tags/job.py`` reads them and carries the actions out."""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from paimond.errors import UnsupportedError
from paimond.maintenance.tags.period import TagPeriod, TagTimeExtractor
from paimond.table.tags import TagFile


@dataclass(frozen=True, slots=True)
class SnapshotTime:
    """What tag creation reads of a snapshot."""

    id: int
    time_millis: int
    watermark: int | None


@dataclass(frozen=True, slots=True)
class TagAction:
    """Create tag ``name`` on ``snapshot_id``, or delete it; ``reason`` says why."""

    create: bool
    name: str
    snapshot_id: int
    reason: str  # period | manual | num-retained-max | time-retained | older-than

    def describe(self) -> str:
        verb = "create" if self.create else "delete"
        return f"{verb} tag {self.name!r} (snapshot {self.snapshot_id}, {self.reason})"


@dataclass(slots=True)
class TagState:
    """Tag name -> snapshot id while a plan unfolds."""

    tags: dict[str, int]
    period: TagPeriod | None
    actions: list[TagAction] = field(default_factory=list)

    def auto_by_snapshot(self) -> dict[int, list[str]]:
        groups: dict[int, list[str]] = {}
        for name, snapshot_id in sorted(self.tags.items()):
            if self.period is not None and self.period.is_auto(name):
                groups.setdefault(snapshot_id, []).append(name)
        return dict(sorted(groups.items()))

    def create(self, name: str, snapshot_id: int, reason: str) -> None:
        if name in self.tags:
            return  # Java: ignoreIfExists
        if self.period is not None and self.period.is_auto(name):
            existing = self.auto_by_snapshot().get(snapshot_id)
            if existing:
                raise UnsupportedError(f"snapshot {snapshot_id} is already auto-tagged with "
                                       f"{existing}; not adding tag {name!r}")
        self.tags[name] = snapshot_id
        self.actions.append(TagAction(True, name, snapshot_id, reason))

    def delete(self, name: str, reason: str) -> None:
        self.actions.append(TagAction(False, name, self.tags.pop(name), reason))

    def trim(self, num_retained_max: int) -> None:
        """Java: delete the automatic tags of the oldest tagged snapshots while more snapshots
        carry one than the limit."""
        groups = self.auto_by_snapshot()
        for snapshot_id, names in list(groups.items())[:max(0, len(groups) - num_retained_max)]:
            if len(names) > 1:
                raise UnsupportedError(f"snapshot {snapshot_id} has more than one auto-created "
                                       f"tag: {', '.join(names)}")
            self.delete(names[0], "num-retained-max")


def resume_point(period: TagPeriod, tags: Mapping[str, int], earliest_id: int | None
                 ) -> tuple[int, datetime.datetime | None]:
    """Java ``TagAutoCreation``'s constructor: (next snapshot to look at, next tag time)."""
    auto = sorted(((t, n) for n in tags if (t := period.time_of(n)) is not None), reverse=True)
    if not auto:
        return (earliest_id if earliest_id is not None else 1), None
    time, name = auto[0]
    return tags[name] + 1, time + period.period


def plan_auto_tags(*, period: TagPeriod, extractor: TagTimeExtractor, delay_ms: int,
                   completion: bool, num_retained_max: int | None, tags: Mapping[str, int],
                   snapshots: Sequence[SnapshotTime], next_tag: datetime.datetime | None
                   ) -> tuple[list[TagAction], datetime.datetime | None]:
    """Java ``TagAutoCreation.tryToCreateTags`` over ``snapshots`` (ascending, from the resume
    point): the actions in order, and the tag time due after them."""
    state = TagState(dict(tags), period)
    delay = datetime.timedelta(milliseconds=delay_ms)
    for snapshot in snapshots:
        moment = extractor.extract(snapshot.time_millis, snapshot.watermark)
        if moment is None:
            continue
        if next_tag is not None and moment - delay < next_tag + period.period:
            continue
        this_tag = period.previous_boundary(moment)
        if completion and next_tag is not None:
            this_tag = next_tag
        state.create(period.name_of(this_tag), snapshot.id, "period")
        next_tag = this_tag + period.period
        if num_retained_max is not None:
            state.trim(num_retained_max)
    if num_retained_max is not None:
        state.trim(num_retained_max)
    return state.actions, next_tag


def retention_end(tag: TagFile) -> datetime.datetime | None:
    """The local date-time after which ``tag`` expires by its retention (None: it does not
    by time)."""
    if tag.create_time is None or tag.time_retained_ns is None:
        return None
    return tag.create_time + datetime.timedelta(microseconds=tag.time_retained_ns // 1000)


def plan_time_expiry(tags: Sequence[TagFile], now: datetime.datetime,
                     older_than: datetime.datetime | None = None,
                     modified: Mapping[str, datetime.datetime] | None = None) -> list[TagAction]:
    """Java ``TagTimeExpire.expire``: a tag goes when now is after its create time plus its
    retention, or, given ``older_than``, when its create time is before that. A tag lacking
    either field counts only with ``older_than``, then by its file's local ``modified`` time
    (none known: kept)."""
    actions = []
    for tag in tags:
        created, retained_ns = tag.create_time, tag.time_retained_ns
        if created is None or retained_ns is None:
            known = None if older_than is None or modified is None else modified.get(tag.name)
            if known is None:
                continue
            created = known  # Java: the file's modification time, even over a create time
        if retained_ns is not None and now > created + datetime.timedelta(
                microseconds=retained_ns // 1000):
            actions.append(TagAction(False, tag.name, tag.snapshot.id, "time-retained"))
        elif older_than is not None and older_than > created:
            actions.append(TagAction(False, tag.name, tag.snapshot.id, "older-than"))
    return actions
