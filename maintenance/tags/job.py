"""Automatic tags, tag expiry, and tags by hand: Java ``TagAutoManager`` = ``TagAutoCreation``
then ``TagTimeExpire``, and ``AbstractFileStoreTable.createTag`` / ``deleteTag``
(apache/paimon 5dacde516b).

Writers with ``write-only=true`` create no tags; this job does what their commits would have.
Java's ``TagAutoCreation`` restores its progress from the newest automatic tag (by the time
its name says): it resumes at the snapshot after that tag's, and the next tag due is the
period after it; with no automatic tag it starts at the earliest snapshot with nothing due.
Then, for each snapshot in id order, the snapshot's time (commit time or watermark) minus
``tag.creation-delay`` must reach the end of the due period; the tag created names the period
before the snapshot's own (or, with ``tag.automatic-completion``, the due period, so missed
periods are filled one snapshot at a time) and pins that snapshot. After each creation the
oldest automatic tags go while more snapshots carry one than ``tag.num-retained-max`` (only
automatic tags count). A tag whose name exists is not written again, and a snapshot never
gets a second automatic tag. Then ``TagTimeExpire`` deletes every tag (automatic or not)
whose create time plus retention is before now. A tag written now records now as its create
time and ``tag.default-time-retained`` as its retention (none: the plain snapshot JSON).
``expire_only`` (the ``expire-tags`` command, Java's ``expire_tags`` procedure) runs the
expiry alone, whatever ``tag.time-expire-enabled`` says, and with ``older_than`` also deletes
every tag created before it (a tag lacking a create time or a retention by its file's
modification time, as Java).

Two choices Java leaves open: the count limit is applied once more at the end of a run (Java
applies it at the next creation), so a rerun after a crash, or a lowered limit, converges;
and a tag written for a snapshot that expired meanwhile is withdrawn (its file only), since
expiry may be deleting its files. Deleting a tag (by hand, by ``tag.num-retained-max``, by
retention) whose snapshot has expired also deletes the files only it kept, as Java's
``TagDeletion``, crash-safe (``maintenance.tags.deletion``). Java's forced empty commits
(``forceCreatingSnapshot``) are the writer's, so a period with no snapshot after its end gets
its tag only when a later snapshot comes. ``tag.automatic-creation=batch`` (a tag at the end
of each batch write) and tag callbacks, success files and tag-to-partition are refused.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass, field

from paimond.clock import Clock
from paimond.errors import ConfigError, MissingFileError, UnsupportedError
from paimond.faults import crash_point
from paimond.maintenance.distributed import TaskMapper
from paimond.maintenance.expire.references import FileTally
from paimond.maintenance.job_cleanup import clean_dead_jobs
from paimond.maintenance.tags.deletion import delete_tag_with_files, preview_tag_deletion
from paimond.maintenance.tags.period import TagTimeExtractor, local_date_time, tag_period
from paimond.maintenance.tags.plan import (
    SnapshotTime,
    TagAction,
    TagState,
    plan_auto_tags,
    plan_time_expiry,
    resume_point,
    retention_end,
)
from paimond.maintenance.tags.source import TagSource, at_or_after, at_or_after_watermark, still_there
from paimond.table.catalog import Table
from paimond.table.options.core import TableOptions
from paimond.table.tags import (
    check_tag_name,
    create_tag_file,
    delete_tag_file,
    list_tags,
    read_tag,
    tag_path,
)

_NS_PER_MS = 1_000_000


@dataclass(frozen=True, slots=True)
class TagsPlan:
    table_name: str
    mode: str  # tag.automatic-creation
    actions: tuple[TagAction, ...]
    create_time: datetime.datetime  # local date-time recorded in the tags written
    time_retained_ns: int | None
    next_tag: str | None = None  # the period whose tag is due next
    # the wall ms at which the next kept tag's retention ends (inf: none ends by time)
    next_expiry_ms: float = math.inf


@dataclass(frozen=True, slots=True)
class TagsResult:
    plan: TagsPlan
    done: tuple[TagAction, ...] = ()
    skipped: tuple[str, ...] = ()  # why planned actions were not done
    dry_run: bool = False
    files: FileTally = field(default_factory=FileTally)  # deleted with the tags

    def quiet_until_ms(self) -> float | None:
        """Nothing to do: automatic creation follows the snapshots alone, so a rerun at the
        same snapshot does nothing before the next tag's retention ends (wall ms; inf: none
        by time). None: this run had something to do, or a dry run."""
        if self.dry_run or self.plan.actions:
            return None
        return self.plan.next_expiry_ms

    def describe(self) -> str:
        plan = self.plan
        head = f"{plan.table_name}: tag.automatic-creation={plan.mode}"
        if plan.next_tag:
            head += f", next tag {plan.next_tag!r}"
        actions = plan.actions if self.dry_run else self.done
        prefix = "would " if self.dry_run else ""
        lines = [head] + [f"  {prefix}{a.describe()}" for a in actions] + [
            f"  skipped: {s}" for s in self.skipped]
        if not actions:
            lines.append("  nothing to do")
        if self.files.total_files:
            verb = "would delete" if self.dry_run else "deleted"
            lines.append(f"  {verb} {self.files.total_files} files only the deleted tags kept:")
            lines += self.files.lines("    ")
        return "\n".join(lines)


# ---- the job -------------------------------------------------------------------------------


def check_tag_options(options: TableOptions, *, creating: bool) -> None:
    """Refuse what changes the job's output and paimond does not do."""
    if creating and options.tag_automatic_creation == "batch":
        raise UnsupportedError("tag.automatic-creation=batch (a tag at the end of each batch "
                               "write) is not done by paimond")
    refused = [key for key in ("tag.callbacks", "metastore.tag-to-partition")
               if (options.raw.get(key) or "").strip()]
    if options.raw.get("tag.create-success-file", "").strip().lower() == "true":
        refused.append("tag.create-success-file")
    if refused:
        raise UnsupportedError(f"tag side effects are not done by paimond: {', '.join(refused)}")


def _retained_ns(options: TableOptions) -> int | None:
    retained_ms = options.tag_default_time_retained_ms
    return None if retained_ms is None else retained_ms * _NS_PER_MS


class TagsJob:
    """Create the automatic tags that are due, then expire tags; ``expire_only`` skips the
    creation (the ``expire-tags`` command)."""

    def __init__(self, table: Table, *, clock: Clock, dry_run: bool = False,
                 expire_only: bool = False, older_than: datetime.datetime | None = None,
                 mapper: TaskMapper | None = None) -> None:
        self.table, self.clock, self.dry_run, self.expire_only = table, clock, dry_run, expire_only
        self.older_than = older_than  # expire_only: also every tag created before it
        self.mapper = mapper  # Spark: the files only an expired tag kept are deleted in tasks

    def plan(self) -> TagsPlan:
        options = self.table.options()
        check_tag_options(options, creating=not self.expire_only)
        now = self.clock.local_now()
        mode = options.tag_automatic_creation
        existing = list_tags(self.table)
        tags = {t.name: t.snapshot.id for t in existing}
        actions: list[TagAction] = []
        next_name = None
        next_expiry_ms = math.inf
        if mode in ("process-time", "watermark") and not self.expire_only:
            period = tag_period(options)
            snapshots = self.table.snapshots
            start, next_tag = resume_point(period, tags, snapshots.earliest_id())
            timed = []
            for snapshot_id in (i for i in snapshots.list_ids() if i >= start):
                try:
                    snapshot = snapshots.load(snapshot_id)
                except MissingFileError:  # expired meanwhile: Java skips to the earliest
                    continue
                timed.append(SnapshotTime(snapshot.id, snapshot.time_millis, snapshot.watermark))
            actions, next_tag = plan_auto_tags(
                period=period, extractor=TagTimeExtractor.of(options),
                delay_ms=options.tag_creation_delay_ms,
                completion=options.tag_automatic_completion,
                num_retained_max=options.tag_num_retained_max, tags=tags, snapshots=timed,
                next_tag=next_tag)
            next_name = None if next_tag is None else period.name_of(next_tag)
        if options.tag_time_expire_enabled or self.expire_only:
            gone = {a.name for a in actions if not a.create}
            kept = [t for t in existing if t.name not in gone]
            modified = None
            if self.older_than is not None:
                modified = {t.name: m for t in kept if (m := self._modified(t.name)) is not None}
            actions += plan_time_expiry(kept, now, self.older_than, modified)
            gone |= {a.name for a in actions if not a.create}
            ends = [end for t in kept if t.name not in gone and (end := retention_end(t))]
            if ends:  # local date-times: the wall moment is as far from now
                next_expiry_ms = (self.clock.wall_ms()
                                  + (min(ends) - now).total_seconds() * 1000 + 1)
        return TagsPlan(self.table.name, mode, tuple(actions), now, _retained_ns(options),
                        next_name, next_expiry_ms)

    def _modified(self, name: str) -> datetime.datetime | None:
        seconds = self.table.storage.mtime(tag_path(self.table, name))
        return None if seconds is None else local_date_time(round(seconds * 1000), None)

    def run(self) -> TagsResult:
        plan = self.plan()
        if self.dry_run:
            return TagsResult(plan, dry_run=True)
        clean_dead_jobs(self.table, self.clock.wall_ms())  # a killed tag deletion's files
        done: list[TagAction] = []
        skipped: list[str] = []
        files = FileTally()
        for action in plan.actions:
            if action.create:
                note = _create(self.table, action, plan.create_time, plan.time_retained_ns)
            else:
                note = _delete(self.table, action, self.clock, files, self.mapper)
            if note is None:
                done.append(action)
            else:
                skipped.append(note)
        return TagsResult(plan, tuple(done), tuple(skipped), files=files)


def _create(table: Table, action: TagAction, create_time: datetime.datetime,
            time_retained_ns: int | None, source: TagSource | None = None) -> str | None:
    """Write one tag of the live snapshot, or of ``source``'s; a note when it was not
    written (None: written)."""
    if source is None:
        try:
            source = TagSource(table.snapshots.load(action.snapshot_id))
        except MissingFileError:
            return f"snapshot {action.snapshot_id} expired before tag {action.name!r} was written"
    if not create_tag_file(table, action.name, source.snapshot, create_time=create_time,
                           time_retained_ns=time_retained_ns):
        return f"tag {action.name!r} exists already"
    crash_point("tags.tag_created")
    if not still_there(table, source):
        # Expiry (or the deletion of the tag holding it) may be deleting the snapshot's
        # files: a tag written after it looked is unsafe.
        delete_tag_file(table, action.name)
        crash_point("tags.tag_withdrawn")
        gone = (f"snapshot {action.snapshot_id} expired" if source.tag is None
                else f"tag {source.tag!r} holding snapshot {action.snapshot_id} went away")
        return f"{gone} while tag {action.name!r} was written"
    return None


def _delete(table: Table, action: TagAction, clock: Clock, files: FileTally,
            mapper: TaskMapper | None) -> str | None:
    """Delete one tag and the files only it kept (added to ``files``); a note when it was
    not deleted (None: deleted)."""
    deleted = delete_tag_with_files(table, action.name, action.snapshot_id, clock,
                                    mapper=mapper)
    if deleted is None:
        return f"tag {action.name!r} changed meanwhile; kept"
    files.files.update(deleted.files.files)
    files.size_bytes.update(deleted.files.size_bytes)
    return None


# ---- tags by hand --------------------------------------------------------------------------


def create_tag(table: Table, *, clock: Clock, name: str, snapshot_id: int | None = None,
               time_retained_ms: int | None = None, from_timestamp_ms: int | None = None,
               from_watermark: int | None = None, dry_run: bool = False) -> TagsResult:
    """Java ``createTag(name, snapshotId, timeRetained)``: the latest snapshot by default,
    ``tag.default-time-retained`` by default; an existing tag is an error. With
    ``from_timestamp_ms`` (Java ``create_tag_from_timestamp``), the snapshot
    ``maintenance.tags.source.at_or_after`` finds, which a tag may hold; with
    ``from_watermark`` (Java ``create_tag_from_watermark``), ``at_or_after_watermark``'s."""
    check_tag_name(name)
    options = table.options()
    check_tag_options(options, creating=False)
    snapshots = table.snapshots
    source = None
    if from_timestamp_ms is not None or from_watermark is not None:
        if snapshot_id is not None or None not in (from_timestamp_ms, from_watermark):
            raise ConfigError("snapshot", "a snapshot id, a timestamp and a watermark are "
                                          "exclusive")
        if from_watermark is not None:
            source = at_or_after_watermark(table, from_watermark)
            if source is None:
                raise ConfigError("from_watermark", f"no snapshot of {table.name} has a "
                                  f"watermark of {from_watermark} or later")
        else:
            assert from_timestamp_ms is not None
            source = at_or_after(table, from_timestamp_ms)
            if source is None:
                raise ConfigError("from_timestamp", f"no snapshot of {table.name} was committed "
                                  f"at or after {from_timestamp_ms} (epoch milliseconds)")
        snapshot_id = source.snapshot.id
    elif snapshot_id is None:
        snapshot_id = snapshots.latest_id()
        if snapshot_id is None:
            raise ConfigError("snapshot", f"{table.name} has no snapshot to tag")
    elif not snapshots.exists(snapshot_id):
        raise ConfigError("snapshot", f"snapshot {snapshot_id} of {table.name} does not exist")
    if read_tag(table, name) is not None:
        raise ConfigError("tag", f"tag {name!r} of {table.name} already exists")
    retained_ns = (_retained_ns(options) if time_retained_ms is None
                   else time_retained_ms * _NS_PER_MS)
    if options.tag_automatic_creation in ("process-time", "watermark"):
        state = TagState({t.name: t.snapshot.id for t in list_tags(table)}, tag_period(options))
        state.create(name, snapshot_id, "manual")  # Java's validateNoAutoTag
    action = TagAction(True, name, snapshot_id, "manual")
    plan = TagsPlan(table.name, "manual", (action,), clock.local_now(), retained_ns)
    if dry_run:
        return TagsResult(plan, dry_run=True)
    note = _create(table, action, plan.create_time, retained_ns, source)
    if note is not None:
        raise ConfigError("tag", note)
    return TagsResult(plan, (action,))


def delete_tag(table: Table, *, clock: Clock, name: str, dry_run: bool = False,
               mapper: TaskMapper | None = None) -> TagsResult:
    """Java ``deleteTag``: a missing tag is not an error (nothing happens but the cleanup of
    a killed deletion's files); the files only the tag kept go with it."""
    check_tag_options(table.options(), creating=False)
    if not dry_run:
        clean_dead_jobs(table, clock.wall_ms())
    tag = read_tag(table, name)
    if tag is None:
        plan = TagsPlan(table.name, "manual", (), clock.local_now(), None)
        return TagsResult(plan, skipped=(f"tag {name!r} does not exist",), dry_run=dry_run)
    action = TagAction(False, name, tag.snapshot.id, "manual")
    plan = TagsPlan(table.name, "manual", (action,), clock.local_now(), None)
    if dry_run:
        return TagsResult(plan, dry_run=True, files=preview_tag_deletion(table, name, tag.snapshot))
    files = FileTally()
    note = _delete(table, action, clock, files, mapper)
    return TagsResult(plan, (action,) if note is None else (), () if note is None else (note,),
                      files=files)
