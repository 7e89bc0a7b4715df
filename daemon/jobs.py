"""The daemon's jobs: thin adapters over the same ``maintenance`` code the CLI runs, each
returning a :class:`JobReport` with the figures metrics and logs need."""

from __future__ import annotations

import datetime
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from paimond.config.settings import JobSettings
from paimond.errors import CommitConflictError, UnsupportedError
from paimond.maintenance.compact import CompactJob
from paimond.table.catalog import Table


@dataclass(frozen=True, slots=True)
class JobReport:
    outcome: str  # success, conflict, skipped (failures raise)
    detail: str = ""
    read_bytes: int = 0
    written_bytes: int = 0
    read_rows: int = 0
    written_rows: int = 0
    conflicts: int = 0


@dataclass(frozen=True, slots=True)
class JobContext:
    table: Table
    storage_root: str
    storage_options: Mapping[str, str]
    settings: JobSettings
    now: Callable[[], datetime.datetime]
    should_stop: Callable[[], bool]


class JobCancelledError(Exception):
    """The daemon is stopping: abandon this job before it commits."""


def run_compact(ctx: JobContext) -> JobReport:
    def progress(done: int, total: int, task: object) -> None:
        if ctx.should_stop():
            raise JobCancelledError()

    job = CompactJob(ctx.table, ctx.storage_root, ctx.storage_options,
                     full=bool(ctx.settings.options.get("full", False)),
                     parallelism=int(ctx.settings.options.get("parallelism", 1)),
                     use_processes=False, now=ctx.now, progress=progress)
    try:
        summary = job.run()
    except UnsupportedError as error:
        return JobReport("skipped", str(error))
    except CommitConflictError as error:
        return JobReport("conflict", str(error), conflicts=1)
    if summary.failures:
        raise RuntimeError(summary.describe())
    return JobReport("success", summary.describe(), read_bytes=summary.bytes_in,
                     written_bytes=summary.bytes_out, read_rows=summary.rows_read,
                     written_rows=summary.rows_written, conflicts=summary.attempts - 1)


def _maintenance_job(module: str, runner: str) -> Callable[[JobContext], JobReport]:
    """Jobs whose module may not exist in this build yet are reported as skipped."""

    def run(ctx: JobContext) -> JobReport:
        try:
            target: Any = getattr(importlib.import_module(f"paimond.maintenance.{module}"), runner)
        except (ImportError, AttributeError):
            return JobReport("skipped", f"{module} is not available in this build")
        report: JobReport = target(ctx)
        return report

    return run


JOBS: dict[str, Callable[[JobContext], JobReport]] = {
    "compact": run_compact,
    "expire": _maintenance_job("expire", "run_daemon_job"),
    "merge_manifests": _maintenance_job("manifests", "run_daemon_job"),
    "remove_orphans": _maintenance_job("orphans", "run_daemon_job"),
}
