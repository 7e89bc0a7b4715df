"""The daemon's jobs: thin adapters over the same ``maintenance`` code the CLI runs, each
returning a :class:`JobReport` with the figures metrics and logs need."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field

from paimond.config.settings import JobSettings
from paimond.errors import CommitConflictError, UnsupportedError
from paimond.lsm.picker import PickerState
from paimond.maintenance.compact import CompactJob, LookupCacheSettings
from paimond.maintenance.expire import ExpireJob, ExpireSettings
from paimond.maintenance.manifests import ManifestMergeJob
from paimond.maintenance.orphans import OrphanJob
from paimond.spark.executor import daemon_executor
from paimond.table.catalog import Table
from paimond.table.options import parse_duration_millis as parse_duration_ms


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
class JobContext:
    table: Table  # its storage location is where workers reopen storage
    settings: JobSettings
    now: Callable[[], datetime.datetime]
    should_stop: Callable[[], bool]
    executor: str = "local"  # where compaction's bucket tasks run: local, spark
    lookup_cache: LookupCacheSettings | None = None
    # compaction: the table's picker states, kept by the caller between runs (gentle mode)
    picker_states: MutableMapping[tuple[bytes, int], PickerState] | None = None


class JobCancelledError(Exception):
    """The daemon is stopping: abandon this job before it commits."""


def run_compact(ctx: JobContext) -> JobReport:
    def progress(done: int, total: int, task: object) -> None:
        if ctx.should_stop():
            raise JobCancelledError()

    job = CompactJob(ctx.table,
                     full=bool(ctx.settings.options.get("full", False)),
                     parallelism=int(ctx.settings.options.get("parallelism", 1)),
                     use_processes=False, now=ctx.now, progress=progress,
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


def _now_ms(ctx: JobContext) -> int:
    return int(ctx.now().timestamp() * 1000)


def run_expire(ctx: JobContext) -> JobReport:
    """Paimon's expiration with the table's options; ``retain_min``, ``retain_max``,
    ``max_deletes`` and ``older_than`` in the job's settings override them."""
    settings = ExpireSettings.of(ctx.table.options())
    options = ctx.settings.options
    settings = dataclasses.replace(
        settings, retain_min=int(options.get("retain_min", settings.retain_min)),
        retain_max=int(options.get("retain_max", settings.retain_max)),
        max_deletes=int(options.get("max_deletes", settings.max_deletes)))
    if "older_than" in ctx.settings.options:
        settings = dataclasses.replace(
            settings, time_retained_ms=parse_duration_ms(str(ctx.settings.options["older_than"])))
    now = _now_ms(ctx)
    try:
        result = ExpireJob(ctx.table, now_ms=lambda: now, settings=settings).run()
    except UnsupportedError as error:
        return JobReport("skipped", str(error))
    return JobReport("success", result.describe())


def run_merge_manifests(ctx: JobContext) -> JobReport:
    try:
        result = ManifestMergeJob(ctx.table, clock_ms=lambda: _now_ms(ctx)).run()
    except CommitConflictError as error:
        return JobReport("conflict", str(error), conflicts=1)
    return JobReport("success", result.describe(), written_bytes=result.written.total_bytes)


def run_remove_orphans(ctx: JobContext) -> JobReport:
    """Orphan removal with its safety window (default 1 day; ``older_than`` in the job's
    settings; windows under 1 hour are refused, never forced from the daemon)."""
    now = _now_ms(ctx)
    older_than = None
    if "older_than" in ctx.settings.options:
        older_than = now - parse_duration_ms(str(ctx.settings.options["older_than"]))
    result = OrphanJob(ctx.table, now_ms=lambda: now, older_than_ms=older_than).run()
    return JobReport("success", result.describe())


JOBS: dict[str, Callable[[JobContext], JobReport]] = {
    "compact": run_compact,
    "expire": run_expire,
    "merge_manifests": run_merge_manifests,
    "remove_orphans": run_remove_orphans,
}
