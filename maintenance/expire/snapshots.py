"""Snapshot expiration: Java ``ExpireSnapshotsImpl``, ``SnapshotDeletion`` and
``FileDeletionBase`` (apache/paimon 5dacde516b), with the options of ``ExpireConfig``.

The plan picks ``end`` (exclusive) from metadata and an injected ``now``: snapshots below
``latest - retain_max + 1`` go regardless, none at or above ``latest - retain_min + 1``,
none a consumer will still read, at most ``max_deletes`` from the earliest, and a snapshot
goes only if its successor is older than ``time_retained``. ``snapshot_deletion`` collects
what goes (Java's choice of files):

- data files retired by a DELETE entry in the delta of a snapshot in (begin, end] (an ADD of
  the same file later in that delta keeps it: an upgrade), unless the newest tag before
  that snapshot, or a branch, still holds it; an extra file that such an ADD no longer lists
  (an index rewrite replaced it) unless anything kept names it; changelog files of
  [begin, end);
- for each snapshot in [begin, end): its manifests, its index files and index manifest, its
  statistics, unless the end snapshot, a tag in range or a branch still names them;
- the snapshot files of [begin, end).

``expiration_record`` deletes them in another order than Java's, so that at any crash every
snapshot a reader can find reads: the list first, then ``EARLIEST`` = end, the snapshot files
ascending, and only then the files they alone named. A run first finishes what a killed run
recorded.

Java reads every expiring snapshot's base manifest list; paimond reads only those a
manifest merge may have changed (``base_lists``: linear in the snapshots expired, not
quadratic), so a base list it need not read is deleted without being decoded. Unlike Java,
an unreadable (corrupt) file it reads, or a missing file of a snapshot that must stay intact
(end, tags, branches), aborts before anything is deleted; files of the snapshots being
expired may be missing (an interrupted earlier run). Branch snapshots and tags also protect
files here.

With a decoupled changelog (``changelog.*`` options above the snapshot ones, Java
``ExpireConfig.isChangelogDecoupled``), each expired snapshot is kept as
``changelog/changelog-<id>`` before its file goes, its changelog files stay, and so does what
its changelog needs (``SnapshotDeletion``): without a changelog producer its APPEND data files
and base and delta manifest lists, with one its changelog manifest list; then
``changelog_expire`` expires the long-lived changelogs, as Java's commit does after snapshot
expiry. ``consumer.changelog-only`` lets consumers hold changelogs only. Long-lived
changelogs on a table that is not decoupled are refused (Java leaves them to its
``expire_changelogs`` procedure, which paimond does not implement).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from paimond.clock import Clock
from paimond.errors import ConfigError, MissingFileError, UnsupportedError
from paimond.maintenance.distributed import mapper_of
from paimond.maintenance.expire.base_lists import ManifestListCache
from paimond.maintenance.expire.changelogs import (
    ChangelogExpireResult,
    ChangelogSettings,
    collect_expired_changelogs,
    execute_changelog_expiration,
    finish_interrupted_changelogs,
    plan_changelog_expiration,
    read_changelog_history,
)
from paimond.maintenance.expire.record import (
    execute_expiration,
    finish_interrupted,
    long_lived_changelogs,
)
from paimond.maintenance.expire.references import FileTally
from paimond.maintenance.expire.snapshot_deletion import ExpireWork, collect_expired
from paimond.maintenance.job_cleanup import TEMP_SWEPT_DIRS
from paimond.table.catalog import Table
from paimond.table.layout import EARLIEST_HINT
from paimond.table.options.core import TableOptions
from paimond.table.options.reader import INT_MAX
from paimond.table.options.semantic import refuse
from paimond.table.scan.snapshot_scan import check_manifest_versions
from paimond.table.storage.temp_files import sweep_temp_files

if TYPE_CHECKING:
    from paimond.maintenance.execution import TaskExecutor


@dataclass(frozen=True, slots=True)
class ExpireSettings:
    """Java ``ExpireConfig`` for snapshots, with ``CoreOptions`` defaults."""

    retain_min: int = 10  # snapshot.num-retained.min
    retain_max: int = INT_MAX  # snapshot.num-retained.max
    time_retained_ms: int = 3_600_000  # snapshot.time-retained
    max_deletes: int = 50  # snapshot.expire.limit
    clean_empty_directories: bool = False  # snapshot.clean-empty-directories
    # changelog.num-retained.min/max, changelog.time-retained; None: the snapshot setting
    changelog_retain_min: int | None = None
    changelog_retain_max: int | None = None
    changelog_time_retained_ms: int | None = None
    consumer_changelog_only: bool = False  # consumer.changelog-only
    produce_changelog: bool = False  # changelog-producer is not none

    @classmethod
    def of(cls, options: TableOptions) -> ExpireSettings:
        return cls(
            retain_min=options.snapshot_num_retained_min,
            retain_max=options.snapshot_num_retained_max,
            time_retained_ms=options.snapshot_time_retained_ms,
            max_deletes=options.snapshot_expire_limit,
            clean_empty_directories=options.snapshot_clean_empty_directories,
            changelog_retain_min=options.changelog_num_retained_min,
            changelog_retain_max=options.changelog_num_retained_max,
            changelog_time_retained_ms=options.changelog_time_retained_ms,
            consumer_changelog_only=options.consumer_changelog_only,
            produce_changelog=options.changelog_producer != "none")

    @property
    def changelog(self) -> ChangelogSettings:
        """Java ``ExpireConfig.Builder.build``: unset changelog options follow the snapshot's."""
        return ChangelogSettings(
            retain_min=_or(self.changelog_retain_min, self.retain_min),
            retain_max=_or(self.changelog_retain_max, self.retain_max),
            time_retained_ms=_or(self.changelog_time_retained_ms, self.time_retained_ms),
            max_deletes=self.max_deletes, clean_empty_directories=self.clean_empty_directories)

    @property
    def changelog_decoupled(self) -> bool:
        """Java ``ExpireConfig.isChangelogDecoupled``."""
        changelog = self.changelog
        return (changelog.retain_max > self.retain_max or changelog.retain_min > self.retain_min
                or changelog.time_retained_ms > self.time_retained_ms)

    @property
    def consumers_hold_snapshots(self) -> bool:
        """Java ``ExpireConfig.isConsumerChangelogOnly`` is false (it needs decoupling)."""
        return not (self.consumer_changelog_only and self.changelog_decoupled)

    def validate(self) -> None:
        if self.retain_min < 1:
            raise ConfigError("snapshot.num-retained.min", f"must be at least 1, got {self.retain_min}")
        if self.retain_max < self.retain_min:
            raise ConfigError("snapshot.num-retained.max", f"retain max ({self.retain_max}) must "
                              f"not be less than retain min ({self.retain_min})")
        if self.changelog_decoupled:  # before snapshot expiry deletes anything
            self.changelog.validate()


# the bounds that stop an expiry range where only a new snapshot moves them
_COUNT_BOUNDS = frozenset({"retain-min", "no snapshots"})


def quiet_bound(bound: str, due_at_ms: int | None) -> float | None:
    """How long an expiry that expired nothing stays so at the same snapshot: for ever (a
    count bound), until ``due_at_ms`` (the age bound), or not at all (a consumer, the limit)."""
    if bound in _COUNT_BOUNDS:
        return math.inf
    return due_at_ms if bound == "time-retained" else None


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def changelog_decoupled(options: TableOptions, settings: ExpireSettings) -> bool:
    """Java ``CoreOptions.changelogLifecycleDecoupled``: a changelog option above its snapshot
    counterpart."""
    return dataclasses.replace(
        settings, changelog_retain_min=options.changelog_num_retained_min,
        changelog_retain_max=options.changelog_num_retained_max,
        changelog_time_retained_ms=options.changelog_time_retained_ms).changelog_decoupled


@dataclass(frozen=True, slots=True)
class SnapshotHistory:
    """The metadata the planner needs: ids, consumer positions, and the commit times of the
    snapshots whose age decides (``id -> timeMillis``; vanished ones are absent)."""

    earliest_id: int | None
    latest_id: int | None
    earliest_hint_present: bool
    min_consumer_next: int | None = None
    time_millis: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExpirePlan:
    table_name: str
    base_snapshot_id: int | None  # the latest snapshot when planned
    earliest_id: int | None
    end_id: int | None  # exclusive; snapshots [earliest, end) expire
    bound: str  # what stopped the range: retain-min, consumer, expire-limit, time-retained
    write_earliest_hint: bool = False  # nothing expires, but the hint is missing
    # bound time-retained: the wall ms from which the snapshot at the bound is old enough
    due_at_ms: int | None = None

    @property
    def expires(self) -> bool:
        return (self.earliest_id is not None and self.end_id is not None
                and self.end_id > self.earliest_id)

    def describe(self) -> str:
        if not self.expires or self.end_id is None:
            return f"{self.table_name}: no snapshot to expire (latest {self.base_snapshot_id})"
        return (f"{self.table_name}: snapshots {self.earliest_id}..{self.end_id - 1} expire, "
                f"{self.end_id}..{self.base_snapshot_id} stay (bound: {self.bound})")


def read_history(table: Table, settings: ExpireSettings) -> SnapshotHistory:
    snapshots = table.snapshots
    latest, earliest = snapshots.latest_id(), snapshots.earliest_id()
    hint = snapshots.read_hint(EARLIEST_HINT) is not None
    consumers = table.consumers() if settings.consumers_hold_snapshots else {}
    history = SnapshotHistory(earliest, latest, hint,
                              min(consumers.values()) if consumers else None)
    if latest is None or earliest is None:
        return history
    low = max(latest - settings.retain_max + 1, earliest)
    high = min(latest - settings.retain_min + 1, earliest + settings.max_deletes)
    for snapshot_id in range(low + 1, high + 1):
        try:
            history.time_millis[snapshot_id] = snapshots.load(snapshot_id).time_millis
        except MissingFileError:
            pass  # expired meanwhile by another process, as Java tolerates
    return history


def plan_expiration(table_name: str, history: SnapshotHistory, settings: ExpireSettings,
                    now_ms: int) -> ExpirePlan:
    """Java ``ExpireSnapshotsImpl.expire``: the range to expire, from metadata alone."""
    settings.validate()
    latest, earliest = history.latest_id, history.earliest_id
    if latest is None or earliest is None:
        return ExpirePlan(table_name, latest, earliest, None, "no snapshots")
    low = max(latest - settings.retain_max + 1, earliest)
    end, bound = latest - settings.retain_min + 1, "retain-min"
    if history.min_consumer_next is not None and history.min_consumer_next < end:
        end, bound = history.min_consumer_next, "consumer"
    if earliest + settings.max_deletes < end:
        end, bound = earliest + settings.max_deletes, "expire-limit"
    older_than_ms = now_ms - settings.time_retained_ms
    due_at_ms: int | None = None
    for snapshot_id in range(low, end):
        successor_ms = history.time_millis.get(snapshot_id + 1)
        if successor_ms is not None and older_than_ms <= successor_ms:
            end, bound = snapshot_id, "time-retained"
            due_at_ms = successor_ms + settings.time_retained_ms + 1
            break
    plan = ExpirePlan(table_name, latest, earliest, end, bound, due_at_ms=due_at_ms)
    if not plan.expires and not history.earliest_hint_present:
        return dataclasses.replace(plan, write_earliest_hint=True)
    return plan


@dataclass
class ExpireResult:
    plan: ExpirePlan
    work: ExpireWork | None
    deleted: FileTally
    dry_run: bool
    finished_records: int = 0  # expirations a killed run left, finished first
    finished: FileTally = field(default_factory=FileTally)  # what finishing them deleted
    changelog: ChangelogExpireResult | None = None  # decoupled: the changelog expiration

    def describe(self) -> str:
        lines = self._finished_lines() + [self._own()]
        return "\n".join(lines + (self.changelog.lines() if self.changelog else []))

    def quiet_until_ms(self) -> float | None:
        """Nothing done, and a rerun at the same latest snapshot and schema does nothing before
        this wall moment (inf: only a new snapshot or schema changes that); None: a rerun may
        do something now (this run expired some, or a consumer holds the range: consumers
        move without a snapshot). A run that wrote only the EARLIEST hint leaves a rerun
        nothing to do."""
        plan = self.plan
        if self.dry_run or self.finished_records or plan.expires:
            return None
        until = quiet_bound(plan.bound, plan.due_at_ms)
        if until is not None and self.changelog is not None:
            changelog = self.changelog.quiet_until_ms()
            until = None if changelog is None else min(until, changelog)
        return until

    def _finished_lines(self) -> list[str]:
        if not self.finished_records:
            return []
        return [f"{self.plan.table_name}: finished {self.finished_records} interrupted "
                f"expiration(s): deleted {self.finished.total_files} files, "
                f"{self.finished.total_bytes:,} bytes", *self.finished.lines("    ")]

    def _own(self) -> str:
        plan, work = self.plan, self.work
        verb = "would delete" if self.dry_run else "deleted"
        if work is None or work.begin_id is None:
            hint = " (EARLIEST hint written)" if plan.write_earliest_hint and not self.dry_run else ""
            return plan.describe() + hint
        lines = [f"{plan.table_name}: {'would expire' if self.dry_run else 'expired'} snapshots "
                 f"{work.begin_id}..{work.end_id - 1} ({work.snapshot_count}); kept "
                 f"{work.end_id}..{plan.base_snapshot_id} (bound: {plan.bound})",
                 f"  {verb} {self.deleted.total_files} files, {self.deleted.total_bytes:,} bytes"]
        lines += self.deleted.lines("    ")
        if work.protected_data_files:
            lines.append(f"  kept {work.protected_data_files} retired data files that a tag or "
                         f"branch still holds")
        if work.write_changelogs:
            lines.append(f"  {'would keep' if self.dry_run else 'kept'} {work.snapshot_count} "
                         f"expired snapshots as long-lived changelogs")
        return "\n".join(lines)


def refuse_stray_changelogs(table: Table, settings: ExpireSettings) -> None:
    """Raise UnsupportedError for long-lived changelogs on a table that is not decoupled:
    Java's snapshot expiry would delete files they name, and only its ``expire_changelogs``
    procedure removes them."""
    if not settings.changelog_decoupled and long_lived_changelogs(table).list_ids():
        raise UnsupportedError(
            "long-lived changelogs under changelog/ but no changelog.* retention above the "
            "snapshot settings: paimond does not implement Paimon's expire_changelogs "
            "procedure; set the changelog retention or expire this table with Paimon",
            table.path)


@dataclass
class ExpireJob:
    """Plan, collect and delete. ``settings`` default to the table's options."""

    table: Table
    clock: Clock  # read once per plan: snapshots older than now - time_retained expire
    settings: ExpireSettings | None = None
    dry_run: bool = False
    executor: TaskExecutor | None = None  # one that maps tasks (Spark) deletes data and metadata in tasks
    # decoded manifest lists a run's rounds share (a round's end is the next one's begin)
    lists: ManifestListCache = field(default_factory=ManifestListCache, repr=False)

    def resolved_settings(self) -> ExpireSettings:
        return self.settings or ExpireSettings.of(self.table.options())

    def plan(self) -> ExpirePlan:
        settings = self.resolved_settings()
        settings.validate()
        refuse(self.table.latest_schema(), "expire", self.table.path)
        return self._plan(settings)

    def _plan(self, settings: ExpireSettings) -> ExpirePlan:
        """The plan of a table already refused (once per run), ``settings`` validated."""
        refuse_stray_changelogs(self.table, settings)
        return plan_expiration(self.table.name, read_history(self.table, settings), settings,
                               self.clock.wall_ms())

    def run(self) -> ExpireResult:
        refuse(self.table.latest_schema(), "expire", self.table.path)  # once per run
        latest = self.table.snapshots.latest()
        if latest is not None:  # a format paimond does not know: refused before any delete
            check_manifest_versions(self.table, latest)
        settings = self.resolved_settings()
        clean = settings.clean_empty_directories
        mapper = mapper_of(self.executor)
        finished = (0, FileTally()) if self.dry_run else finish_interrupted(
            self.table, clean_empty_directories=clean, mapper=mapper)
        finished_changelogs = (0, FileTally()) if self.dry_run else finish_interrupted_changelogs(
            self.table, clean_empty_directories=clean, mapper=mapper)
        if not self.dry_run:  # what a killed run left half written in snapshot/, changelog/
            sweep_temp_files(self.table.storage,
                             [self.table.file_path(d) for d in TEMP_SWEPT_DIRS],
                             self.clock.wall_ms() / 1000)
        settings.validate()
        plan = self._plan(settings)
        if not plan.expires:
            if plan.write_earliest_hint and plan.earliest_id is not None and not self.dry_run:
                self.table.storage.write_bytes(self.table.snapshots.hint_path(EARLIEST_HINT),
                                               str(plan.earliest_id).encode())
            result = ExpireResult(plan, None, FileTally(), self.dry_run, *finished)
        else:
            assert plan.earliest_id is not None and plan.end_id is not None  # plan.expires
            work = collect_expired(self.table, plan.earliest_id, plan.end_id,
                                   decoupled=settings.changelog_decoupled,
                                   produce_changelog=settings.produce_changelog,
                                   lists=self.lists)
            deleted = execute_expiration(self.table, work, dry_run=self.dry_run,
                                         clean_empty_directories=clean, mapper=mapper)
            result = ExpireResult(plan, work, deleted, self.dry_run, *finished)
        if settings.changelog_decoupled:
            result.changelog = self._expire_changelogs(settings, finished_changelogs)
        return result

    def _expire_changelogs(self, settings: ExpireSettings,
                           finished: tuple[int, FileTally]) -> ChangelogExpireResult:
        """Java ``ExpireChangelogImpl.expire``, after snapshot expiry; consumers always hold
        changelogs."""
        consumers = self.table.consumers()
        history = read_changelog_history(self.table, settings.changelog,
                                         min(consumers.values()) if consumers else None)
        plan = plan_changelog_expiration(self.table.name, history, settings.changelog,
                                         self.clock.wall_ms())
        work = None
        if plan.expires:
            assert plan.earliest_id is not None and plan.end_id is not None
            work = collect_expired_changelogs(self.table, plan.earliest_id, plan.end_id)
        deleted = FileTally() if work is None else execute_changelog_expiration(
            self.table, work, dry_run=self.dry_run,
            clean_empty_directories=settings.clean_empty_directories,
            mapper=mapper_of(self.executor))
        return ChangelogExpireResult(plan, work, deleted, self.dry_run, *finished)
