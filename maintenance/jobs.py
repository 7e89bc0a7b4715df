"""The one job registry: a job's name -> its typed settings and how it runs on a table.

The command line, the daemon and Spark's ``maintain`` all look jobs up here, so a job is wired
in exactly one place. ``run(table, settings, context)`` returns a :class:`JobReport` carrying
the job's own result (``describe()`` prints it) and the figures metrics need; errors propagate
(the caller decides what a conflict or an unsupported table means to it).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import importlib
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from paimond.clock import Clock
from paimond.config.declare import setting
from paimond.errors import ConfigError

if TYPE_CHECKING:  # a job's modules are imported when it runs (tests/maintenance/test_jobs.py)
    from paimond.lsm.picker import PickerState
    from paimond.maintenance.compact.memory import MemoryBudget
    from paimond.maintenance.execution import LookupCacheSettings, TaskExecutor
    from paimond.maintenance.regenerate.pending import RegenerationMemory
    from paimond.table.catalog import Table
    from paimond.table.partition_filter import PartitionSelection


class Described(Protocol):
    def describe(self) -> str: ...


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a run needs besides the table and its settings."""

    clock: Clock
    executor: TaskExecutor | None = None  # compaction's bucket tasks; None: the local pool
    # (done, total, what) after each unit of work; may raise to abandon the job before it commits
    progress: Callable[..., None] | None = None
    lookup_cache: LookupCacheSettings | None = None
    # compaction: the table's picker states, kept by a long-lived caller (gentle lookup mode)
    picker_states: MutableMapping[tuple[bytes, int], PickerState] | None = None
    # rebuild_dv / rewrite_index bounded passes: what earlier passes handled (the daemon's)
    regeneration: RegenerationMemory | None = None
    # compaction's local pool admits bucket tasks within it (limits.memory_budget_mb)
    memory_budget: MemoryBudget | None = None


@dataclass(frozen=True, slots=True)
class JobReport:
    result: Described
    failed: bool = False  # part of the job failed (a bucket); the rest was committed
    read_bytes: int = 0
    written_bytes: int = 0
    read_rows: int = 0
    written_rows: int = 0
    replans: int = 0  # commit conflicts the job re-planned after
    rows_superseded: int = 0  # compaction: higher-level rows newly deleted by vectors
    lookup_cache: Mapping[str, int] = field(default_factory=dict)  # hit/miss/discarded files
    # the run did nothing, and a rerun at the same latest snapshot and schema does nothing
    # before this wall ms (inf: only a new snapshot or schema changes that); None: it may
    quiet_until_ms: float | None = None


# ---- settings ------------------------------------------------------------------------------


# Each job's settings, declared once (config/declare.py): the command line, Spark's maintain and
# the daemon build them; fields marked daemon=True are the keys of the daemon's [jobs.<name>]
# section (besides enabled and interval_s), with the daemon's default where it differs.
_HOUR_MS = 3_600_000  # maintenance/expire/orphans.py MIN_WINDOW_MS: shorter needs --force
_DRY_RUN = "report what the job would do; change nothing"


@dataclass(frozen=True, slots=True)
class CompactSettings:
    full: bool = setting(False, "compact every bucket to one sorted run at the max level",
                         daemon=True)
    parallelism: int | None = setting(
        None, "bucket tasks at once; unset: the CPU count (the daemon's default: 1)",
        minimum=1, daemon=True, daemon_default=1)
    partitions: Mapping[str, str] | None = setting(None, "only the partition with these values")
    where: str | None = setting(None, "only the partitions this SQL predicate over partition "
                                      "columns selects (Paimon's compact where)")
    dry_run: bool = setting(False, "the plan is the result")
    use_processes: bool = setting(True, "the local pool runs processes, else threads")
    order_strategy: str | None = setting(
        None, "a sort compaction (Paimon's order_strategy)", choices=("order", "zorder", "hilbert"))
    order_by: tuple[str, ...] = setting((), "the sort compaction's columns")
    allow_unknown_options: tuple[str, ...] = setting(
        (), "table option keys paimond has not decided that compaction accepts (a table with "
        "any other undecided key is refused)", daemon=True)


@dataclass(frozen=True, slots=True)
class ExpireOverrides:
    """Overrides of the table's own expiration options (None: the option applies)."""

    retain_min: int | None = setting(None, "snapshots kept at least (over "
                                     "snapshot.num-retained.min)", minimum=1, daemon=True)
    retain_max: int | None = setting(None, "snapshots kept at most (over "
                                     "snapshot.num-retained.max)", minimum=1, daemon=True,
                                     not_below="retain_min")
    max_deletes: int | None = setting(None, "snapshots expired per round at most (over "
                                      "snapshot.expire.limit)", minimum=1, daemon=True)
    older_than_ms: int | None = setting(None, "expire snapshots older than this window (over "
                                        "snapshot.time-retained)", duration=True, daemon=True,
                                        key="older_than")
    older_than_timestamp_ms: int | None = setting(None, "or older than this moment (epoch ms)")
    dry_run: bool = setting(False, _DRY_RUN)


@dataclass(frozen=True, slots=True)
class ConsumerExpireSettings:
    older_than_ms: int | None = setting(None, "consumers idle longer than this expire (over "
                                        "consumer.expiration-time)", duration=True)
    dry_run: bool = setting(False, _DRY_RUN)


@dataclass(frozen=True, slots=True)
class ExpirePartitionsSettings:
    older_than_ms: int | None = setting(None, "partitions older than this expire (over "
                                        "partition.expiration-time)", duration=True)
    max_num: int | None = setting(None, "partitions dropped at most (over "
                                  "partition.expiration-max-num)", minimum=1)
    dry_run: bool = setting(False, _DRY_RUN)


@dataclass(frozen=True, slots=True)
class ManifestMergeSettings:
    dry_run: bool = setting(False, _DRY_RUN)
    # the daemon merges by manifest.merge-min-count and the full-compaction size, as a writer's
    # commit does: forcing would commit a COMPACT snapshot after nearly every writer commit
    forced: bool = setting(True, "merge whatever can be (Java compact_manifest), else by the "
                           "table's thresholds (the daemon's default)", daemon=True,
                           daemon_default=False)


@dataclass(frozen=True, slots=True)
class OrphanSettings:
    older_than_ms: int | None = setting(None, "the safety window: files younger are kept "
                                        "(unset: 1 day; at least 1 h)", duration=True,
                                        minimum=_HOUR_MS, daemon=True, key="older_than")
    older_than_timestamp_ms: int | None = setting(None, "or files older than this moment "
                                                  "(epoch ms)")
    dry_run: bool = setting(False, _DRY_RUN)
    force: bool = setting(False, "allow a window under 1 hour")


@dataclass(frozen=True, slots=True)
class RewriteIndexSettings:
    partitions: Mapping[str, str] | None = setting(None, "only the partition with these values")
    parallelism: int = setting(4, "bucket tasks at once", minimum=1)
    dry_run: bool = setting(False, _DRY_RUN)
    max_files: int | None = setting(None, "a bounded pass over stale files only, re-indexing "
                                    "at most this many", minimum=1, daemon=True,
                                    daemon_default=100)


@dataclass(frozen=True, slots=True)
class RebuildDvSettings:
    partitions: Mapping[str, str] | None = setting(None, "only the partition with these values")
    dry_run: bool = setting(False, _DRY_RUN)
    discard_existing: bool = setting(False, "rebuild vectors that exist too")
    max_files: int | None = setting(None, "a bounded pass over buckets missing vectors, "
                                    "reading at most this many level >= 1 files (at least one "
                                    "bucket)", minimum=1, daemon=True, daemon_default=200)


@dataclass(frozen=True, slots=True)
class TagsSettings:
    """The ``tags`` job (auto-create then expire) and ``expire_tags`` (expire only)."""

    dry_run: bool = setting(False, _DRY_RUN)


@dataclass(frozen=True, slots=True)
class ExpireTagsSettings:
    """``expire_tags``: retention expiry (Java's expire_tags procedure, which forces
    ``tag.time-expire-enabled``), and optionally every tag created before a moment."""

    older_than_ms: int | None = setting(None, "also tags created longer ago than this",
                                        duration=True)
    older_than: datetime.datetime | None = setting(None, "or before this local date-time")
    dry_run: bool = setting(False, _DRY_RUN)


@dataclass(frozen=True, slots=True)
class CreateTagSettings:
    tag: str = setting("", "the tag's name")
    snapshot_id: int | None = setting(None, "the tagged snapshot; unset: the latest", minimum=1)
    time_retained_ms: int | None = setting(None, "how long the tag lives; unset: "
                                           "tag.default-time-retained", duration=True)
    dry_run: bool = setting(False, _DRY_RUN)


@dataclass(frozen=True, slots=True)
class RescaleSettings:
    bucket_num: int | None = setting(None, "the partitions' new bucket number; unset: the "
                                     "table's bucket option (required for bucket = -2)",
                                     minimum=1)
    partitions: Mapping[str, str] | None = setting(None, "only the partition with these values")
    dry_run: bool = setting(False, _DRY_RUN)


@dataclass(frozen=True, slots=True)
class DeleteTagSettings:
    tag: str = setting("", "the tag's name")
    dry_run: bool = setting(False, _DRY_RUN)


# ---- runs ----------------------------------------------------------------------------------


def _compact(table: Table, settings: CompactSettings, context: JobContext) -> JobReport:
    from paimond.maintenance.compact.job import CompactJob

    partitions = _selected_partitions(table, settings)
    if settings.order_strategy is not None:
        return _sort_compact(table, settings, context, partitions)
    schema = table.latest_schema()  # one listing of schema/ for the run
    if not schema.primary_keys:
        from paimond.maintenance.compact.cluster_plan import incremental_clustering
        from paimond.table.options.core import TableOptions

        if incremental_clustering(TableOptions.of(schema)):
            return _sort_compact(table, settings, context, partitions, clustering=True)
    job = CompactJob(table, clock=context.clock, full=settings.full, partitions=partitions,
                     use_processes=settings.use_processes,
                     progress=context.progress, executor=context.executor,
                     lookup_cache=context.lookup_cache, picker_states=context.picker_states,
                     memory=context.memory_budget,
                     accepted_options=settings.allow_unknown_options,
                     **({} if settings.parallelism is None else {"parallelism": settings.parallelism}))
    if settings.dry_run:
        return JobReport(job.plan())
    summary = job.run(schema)
    results = summary.results
    cache = {"hit": sum(r.cache_hits for r in results),
             "miss": sum(r.cache_misses for r in results),
             "discarded": sum(r.cache_discarded for r in results)}
    return JobReport(summary, failed=bool(summary.failures), read_bytes=summary.bytes_in,
                     written_bytes=summary.bytes_out, read_rows=summary.rows_read,
                     written_rows=summary.rows_written, replans=max(0, summary.attempts - 1),
                     rows_superseded=sum(r.rows_superseded for r in results), lookup_cache=cache)


def _selected_partitions(table: Table, settings: CompactSettings) -> PartitionSelection | None:
    """``partitions``, or the ``where`` filter bound to the table's partition columns
    (ConfigError for a predicate it cannot take, or both given, as Paimon's procedure)."""
    if settings.where is None:
        return settings.partitions
    if settings.partitions:
        raise ConfigError("where", "cannot be used with partitions (Paimon: partitions and "
                                   "where cannot be used together)")
    from paimond.table.partition_filter import table_partition_filter

    return table_partition_filter(settings.where, table.latest_schema(), table.name)


def _sort_compact(table: Table, settings: CompactSettings, context: JobContext,
                  partitions: PartitionSelection | None, *, clustering: bool = False
                  ) -> JobReport:
    """A sort compaction, or Paimon's incremental clustering of a table that asks for it."""
    from paimond.maintenance.compact.cluster_plan import plan_incremental_clustering
    from paimond.maintenance.compact.sort_compact import SortCompactJob

    accepted = settings.allow_unknown_options
    planner = (functools.partial(plan_incremental_clustering, table, full=settings.full,
                                 partitions=partitions, accepted_options=accepted)
               if clustering else None)
    budget = ({} if context.memory_budget is None
              else {"memory_budget_bytes": context.memory_budget.budget_bytes})
    job = SortCompactJob(table, settings.order_strategy or "", settings.order_by,
                         clock=context.clock, partitions=partitions, planner=planner,
                         accepted_options=accepted, executor=context.executor, **budget)
    if settings.dry_run:
        return JobReport(job.plan())
    summary = job.run()
    return JobReport(summary, read_rows=sum(r.rows for r in summary.results),
                     written_rows=sum(r.rows for r in summary.results),
                     replans=max(0, summary.attempts - 1))


def _expire(table: Table, settings: ExpireOverrides, context: JobContext) -> JobReport:
    from paimond.maintenance.expire.rounds import expire_in_rounds
    from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings

    options = ExpireSettings.of(table.options())
    retained_ms = options.time_retained_ms
    if settings.older_than_ms is not None:
        retained_ms = settings.older_than_ms
    elif settings.older_than_timestamp_ms is not None:
        retained_ms = context.clock.wall_ms() - settings.older_than_timestamp_ms
    options = dataclasses.replace(
        options, time_retained_ms=retained_ms,
        retain_min=options.retain_min if settings.retain_min is None else settings.retain_min,
        retain_max=options.retain_max if settings.retain_max is None else settings.retain_max,
        max_deletes=options.max_deletes if settings.max_deletes is None else settings.max_deletes)
    job = ExpireJob(table, clock=context.clock, settings=options, dry_run=settings.dry_run,
                    executor=context.executor)
    # further bounded rounds while snapshot.expire.limit cut the last one (expire_rounds)
    rounds = expire_in_rounds(job, context.progress)
    return JobReport(rounds, quiet_until_ms=rounds.quiet_until_ms())


def _expire_consumers(table: Table, settings: ConsumerExpireSettings, context: JobContext
                      ) -> JobReport:
    from paimond.maintenance.expire.consumers import ConsumerExpireJob

    job = ConsumerExpireJob(table, clock=context.clock, older_than_ms=settings.older_than_ms,
                            dry_run=settings.dry_run)
    result = job.run()
    return JobReport(result, quiet_until_ms=result.quiet_until_ms())


def _expire_partitions(table: Table, settings: ExpirePartitionsSettings, context: JobContext
                       ) -> JobReport:
    from paimond.maintenance.expire.partitions import PartitionExpireJob

    job = PartitionExpireJob(table, clock=context.clock, older_than_ms=settings.older_than_ms,
                             max_num=settings.max_num, dry_run=settings.dry_run)
    result = job.run()
    return JobReport(result, replans=max(0, result.attempts - 1),
                     quiet_until_ms=result.quiet_until_ms())


def _merge_manifests(table: Table, settings: ManifestMergeSettings, context: JobContext
                     ) -> JobReport:
    from paimond.maintenance.manifests import ManifestMergeJob

    result = ManifestMergeJob(table, clock=context.clock, dry_run=settings.dry_run,
                              forced=settings.forced).run()
    return JobReport(result, written_bytes=result.written.total_bytes,
                     quiet_until_ms=result.quiet_until_ms())


def _remove_orphans(table: Table, settings: OrphanSettings, context: JobContext) -> JobReport:
    from paimond.maintenance.expire.orphans import OrphanJob

    older_than = settings.older_than_timestamp_ms
    if settings.older_than_ms is not None:
        older_than = context.clock.wall_ms() - settings.older_than_ms
    job = OrphanJob(table, clock=context.clock, older_than_ms=older_than,
                    dry_run=settings.dry_run, force=settings.force,
                    executor=context.executor)
    return JobReport(job.run())


def _rewrite_index(table: Table, settings: RewriteIndexSettings, context: JobContext
                   ) -> JobReport:
    from paimond.maintenance.regenerate.rewrite_index import IndexRewriteJob

    job = IndexRewriteJob(table, clock=context.clock, partitions=settings.partitions,
                          dry_run=settings.dry_run, parallelism=settings.parallelism,
                          progress=context.progress, max_files=settings.max_files,
                          memory=context.regeneration, executor=context.executor)
    return JobReport(job.run())


def _rebuild_dv(table: Table, settings: RebuildDvSettings, context: JobContext) -> JobReport:
    from paimond.maintenance.regenerate.rebuild_dv import RebuildDvJob

    job = RebuildDvJob(table, clock=context.clock, dry_run=settings.dry_run,
                       discard_existing=settings.discard_existing,
                       partitions=settings.partitions, progress=context.progress,
                       max_files=settings.max_files, memory=context.regeneration,
                       executor=context.executor)
    return JobReport(job.run())


def _tags(table: Table, settings: TagsSettings, context: JobContext) -> JobReport:
    from paimond.maintenance.distributed import mapper_of
    from paimond.maintenance.tags.job import TagsJob

    result = TagsJob(table, clock=context.clock, dry_run=settings.dry_run,
                     mapper=mapper_of(context.executor)).run()
    return JobReport(result, quiet_until_ms=result.quiet_until_ms())


def _expire_tags(table: Table, settings: ExpireTagsSettings, context: JobContext) -> JobReport:
    from paimond.maintenance.distributed import mapper_of
    from paimond.maintenance.tags.job import TagsJob

    older_than = settings.older_than
    if settings.older_than_ms is not None:
        older_than = context.clock.local_now() - datetime.timedelta(
            milliseconds=settings.older_than_ms)
    job = TagsJob(table, clock=context.clock, dry_run=settings.dry_run, expire_only=True,
                  older_than=older_than, mapper=mapper_of(context.executor))
    return JobReport(job.run())


def _create_tag(table: Table, settings: CreateTagSettings, context: JobContext) -> JobReport:
    from paimond.maintenance.tags.job import create_tag

    return JobReport(create_tag(table, clock=context.clock, name=settings.tag,
                                snapshot_id=settings.snapshot_id,
                                time_retained_ms=settings.time_retained_ms,
                                dry_run=settings.dry_run))


def _rescale(table: Table, settings: RescaleSettings, context: JobContext) -> JobReport:
    from paimond.maintenance.compact.rescale import RescaleSummary, rescale
    from paimond.maintenance.distributed import mapper_of

    budget = ({} if context.memory_budget is None
              else {"memory_budget_bytes": context.memory_budget.budget_bytes})
    result = rescale(table, settings.bucket_num, clock=context.clock,
                     partitions=settings.partitions, dry_run=settings.dry_run,
                     mapper=mapper_of(context.executor), **budget)
    if not isinstance(result, RescaleSummary):
        return JobReport(result)
    return JobReport(result, read_rows=result.rows_read, written_rows=result.rows_written)


def _delete_tag(table: Table, settings: DeleteTagSettings, context: JobContext) -> JobReport:
    from paimond.maintenance.distributed import mapper_of
    from paimond.maintenance.tags.job import delete_tag

    return JobReport(delete_tag(table, clock=context.clock, name=settings.tag,
                                dry_run=settings.dry_run, mapper=mapper_of(context.executor)))


# ---- the registry --------------------------------------------------------------------------

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Job(Generic[S]):
    name: str
    settings_type: type[S]
    run: Callable[[Table, S, JobContext], JobReport]
    enabled: bool = True  # the daemon runs it (routine jobs) unless [jobs.<name>] says not
    interval_s: float = 60.0  # the daemon's default seconds between runs on a table

    def settings(self, **values: Any) -> S:
        """This job's settings from ``values``; raises ConfigError naming a key it lacks."""
        names = [f.name for f in dataclasses.fields(self.settings_type)]  # type: ignore[arg-type]
        unknown = sorted(set(values) - set(names))
        if unknown:
            raise ConfigError(unknown[0], f"not a setting of job {self.name}; its settings: "
                                          f"{', '.join(names)}")
        return self.settings_type(**values)


JOBS: Mapping[str, Job[Any]] = {job.name: job for job in (
    Job("compact", CompactSettings, _compact, interval_s=60.0),
    Job("expire", ExpireOverrides, _expire, interval_s=300.0),
    Job("expire_consumers", ConsumerExpireSettings, _expire_consumers, interval_s=600.0),
    # Java's partition.expiration-check-interval default
    Job("expire_partitions", ExpirePartitionsSettings, _expire_partitions, interval_s=3600.0),
    Job("merge_manifests", ManifestMergeSettings, _merge_manifests, interval_s=600.0),
    Job("remove_orphans", OrphanSettings, _remove_orphans, enabled=False, interval_s=86400.0),
    # due only while live files' indexes differ from the file-index.* options
    Job("rewrite_index", RewriteIndexSettings, _rewrite_index, interval_s=10.0),
    # due only while buckets of a deletion-vector table miss their vectors
    # (maintenance/regenerate/pending.py); at least this long between two passes on a table
    Job("rebuild_dv", RebuildDvSettings, _rebuild_dv, interval_s=10.0),
    Job("tags", TagsSettings, _tags, interval_s=300.0),
    Job("expire_tags", ExpireTagsSettings, _expire_tags),
    Job("create_tag", CreateTagSettings, _create_tag),
    Job("delete_tag", DeleteTagSettings, _delete_tag),
    Job("rescale", RescaleSettings, _rescale),
)}
# Every module a run above imports when it runs (tests/maintenance/test_job_registry.py keeps
# this equal to the runs' imports).
JOB_MODULES = (
    "paimond.maintenance.compact.cluster_plan", "paimond.maintenance.compact.job",
    "paimond.maintenance.expire.consumers", "paimond.maintenance.expire.snapshots",
    "paimond.maintenance.expire.rounds", "paimond.maintenance.manifests",
    "paimond.maintenance.expire.orphans", "paimond.maintenance.expire.partitions",
    "paimond.maintenance.regenerate.rebuild_dv", "paimond.maintenance.regenerate.rewrite_index",
    "paimond.maintenance.compact.sort_compact", "paimond.maintenance.tags.job",
    "paimond.maintenance.compact.rescale", "paimond.maintenance.distributed",
    "paimond.table.options.core",
)


def preload() -> None:
    """Import every job's modules now: a long-lived process whose threads run jobs (the daemon)
    calls it at start, so that no job's first import is under way in one thread while another
    forks a compaction's worker processes (a child would wait forever on that module's lock)."""
    for module in JOB_MODULES:
        importlib.import_module(module)


# The jobs a table's routine maintenance runs, in this order (the daemon, Spark's maintain):
# missing vectors first (readers are wrong until they exist); indexes after compaction has
# rewritten what it would; partitions drop, tags and consumers settle before snapshots expire
# (a new tag then protects its snapshot, an expired consumer no longer pins any).
ROUTINE_JOBS = ("rebuild_dv", "compact", "rewrite_index", "expire_partitions", "tags",
                "expire_consumers", "expire", "merge_manifests", "remove_orphans")
# The daemon's jobs, handed to its settings' loader (load_settings(..., jobs=ROUTINE)).
ROUTINE: tuple[Job[Any], ...] = tuple(JOBS[name] for name in ROUTINE_JOBS)
