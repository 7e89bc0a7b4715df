"""The daemon's jobs: thin adapters over the same ``maintenance`` code the CLI runs, each
returning a :class:`JobReport` with the figures metrics and logs need."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from paimond.clock import Clock
from paimond.config.settings import (
    CompactJobSettings,
    ExpireJobSettings,
    JobSettings,
    MergeManifestsJobSettings,
    RemoveOrphansJobSettings,
)
from paimond.errors import CommitConflictError, UnsupportedError
from paimond.lsm.picker import PickerState
from paimond.maintenance.compact import CompactJob, LookupCacheSettings
from paimond.maintenance.expire import ExpireJob, ExpireSettings
from paimond.maintenance.manifests import ManifestMergeJob
from paimond.maintenance.orphans import OrphanJob
from paimond.spark.executor import daemon_executor
from paimond.table.catalog import Table

S = TypeVar("S", bound=JobSettings)


@dataclass(frozen=True, slots=True)
class JobReport:
    outcome: str  # success, conflict, skipped (failures raise)
    detail: str = ""
    read_bytes: int = 0
    written_bytes: int = 0
    read_rows: int = 0
    written_rows: int = 0
    conflicts: int = 0
    rows_superseded: int = 0  # compaction: higher-level rows newly deleted by vectors
    lookup_cache: Mapping[str, int] = field(default_factory=dict)  # hit/miss/discarded files


@dataclass(frozen=True, slots=True)
class JobContext(Generic[S]):
    table: Table  # its storage location is where workers reopen storage
    settings: S  # the job's typed section of the daemon's settings, validated at start
    clock: Clock  # the daemon's: the jobs' one source of time
    should_stop: Callable[[], bool]
    executor: str = "local"  # where compaction's bucket tasks run: local, spark
    lookup_cache: LookupCacheSettings | None = None
    # compaction: the table's picker states, kept by the caller between runs (gentle mode)
    picker_states: MutableMapping[tuple[bytes, int], PickerState] | None = None


class JobCancelledError(Exception):
    """The daemon is stopping: abandon this job before it commits."""


def run_compact(ctx: JobContext[CompactJobSettings]) -> JobReport:
    def progress(done: int, total: int, task: object) -> None:
        if ctx.should_stop():
            raise JobCancelledError()

    job = CompactJob(ctx.table,
                     full=ctx.settings.full, parallelism=ctx.settings.parallelism,
                     use_processes=False, clock=ctx.clock, progress=progress,
                     executor=daemon_executor(ctx.executor), lookup_cache=ctx.lookup_cache,
                     picker_states=ctx.picker_states)
    try:
        summary = job.run()
    except UnsupportedError as error:
        return JobReport("skipped", str(error))
    except CommitConflictError as error:
        return JobReport("conflict", str(error), conflicts=1)
    if summary.failures:
        raise RuntimeError(summary.describe())
    results = summary.results
    cache = {"hit": sum(r.cache_hits for r in results),
             "miss": sum(r.cache_misses for r in results),
             "discarded": sum(r.cache_discarded for r in results)}
    return JobReport("success", summary.describe(), read_bytes=summary.bytes_in,
                     written_bytes=summary.bytes_out, read_rows=summary.rows_read,
                     written_rows=summary.rows_written, conflicts=summary.attempts - 1,
                     rows_superseded=sum(r.rows_superseded for r in results),
                     lookup_cache=cache)


def run_expire(ctx: JobContext[ExpireJobSettings]) -> JobReport:
    """Paimon's expiration with the table's options; ``retain_min``, ``retain_max``,
    ``max_deletes`` and ``older_than`` in the job's settings override them."""
    settings = ExpireSettings.of(ctx.table.options())
    job = ctx.settings
    settings = dataclasses.replace(
        settings,
        retain_min=settings.retain_min if job.retain_min is None else job.retain_min,
        retain_max=settings.retain_max if job.retain_max is None else job.retain_max,
        max_deletes=settings.max_deletes if job.max_deletes is None else job.max_deletes,
        time_retained_ms=(settings.time_retained_ms if job.older_than_ms is None
                          else job.older_than_ms))
    try:
        result = ExpireJob(ctx.table, clock=ctx.clock, settings=settings).run()
    except UnsupportedError as error:
        return JobReport("skipped", str(error))
    return JobReport("success", result.describe())


def run_merge_manifests(ctx: JobContext[MergeManifestsJobSettings]) -> JobReport:
    try:
        result = ManifestMergeJob(ctx.table, clock=ctx.clock).run()
    except CommitConflictError as error:
        return JobReport("conflict", str(error), conflicts=1)
    return JobReport("success", result.describe(), written_bytes=result.written.total_bytes)


def run_remove_orphans(ctx: JobContext[RemoveOrphansJobSettings]) -> JobReport:
    """Orphan removal with its safety window (default 1 day; ``older_than`` in the job's
    settings; windows under 1 hour are refused, never forced from the daemon)."""
    window_ms = ctx.settings.older_than_ms
    older_than = None if window_ms is None else ctx.clock.wall_ms() - window_ms
    result = OrphanJob(ctx.table, clock=ctx.clock, older_than_ms=older_than).run()
    return JobReport("success", result.describe())


# Each runner takes the context of its own job's settings (Settings.job(name)).
JOBS: dict[str, Callable[[JobContext[Any]], JobReport]] = {
    "compact": run_compact,
    "expire": run_expire,
    "merge_manifests": run_merge_manifests,
    "remove_orphans": run_remove_orphans,
}
