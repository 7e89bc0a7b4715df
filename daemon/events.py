"""What happened to a job, as plain values: the runner emits them, metrics and logs subscribe
(the hooks of dramatiq's ``Middleware``, as events instead of methods)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from paimond.daemon.logging import get_logger
from paimond.daemon.outcomes import JobOutcome
from paimond.errors import ErrorKind

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class JobStarted:
    table: str
    job: str
    job_id: str


@dataclass(frozen=True, slots=True)
class JobFinished:
    """A job that returned a report: success, conflict or skipped."""

    table: str
    job: str
    job_id: str
    duration_s: float
    report: JobOutcome


@dataclass(frozen=True, slots=True)
class JobFailed:
    table: str
    job: str
    job_id: str
    duration_s: float
    error_kind: ErrorKind
    error: str  # "TypeName: message"


@dataclass(frozen=True, slots=True)
class CommitConflicted:
    """A job's commits met ``conflicts`` conflicts and re-planned ``retries`` times."""

    table: str
    job: str
    job_id: str
    conflicts: int
    retries: int


JobEvent = JobStarted | JobFinished | JobFailed | CommitConflicted
Subscriber = Callable[[JobEvent], None]


class Events:
    """Subscribers called in order, in the emitting job's thread (so its bound log context
    applies). A subscriber's error is logged and never fails the job."""

    def __init__(self, *subscribers: Subscriber) -> None:
        self._subscribers = list(subscribers)

    def subscribe(self, subscriber: Subscriber) -> None:
        self._subscribers.append(subscriber)

    def emit(self, event: JobEvent) -> None:
        for subscriber in self._subscribers:
            try:
                subscriber(event)
            except Exception:  # an observer's bug must not change what the job did
                log.exception("event_subscriber_failed", subscriber=repr(subscriber),
                              event_type=type(event).__name__)


def log_event(event: JobEvent) -> None:
    """The job events' log lines; ``table``, ``job`` and ``job_id`` are named explicitly so
    a line reads alone even outside the job's bound context."""
    where = {"table": event.table, "job": event.job, "job_id": event.job_id}
    if isinstance(event, JobStarted):
        log.debug("job_started", **where)
    elif isinstance(event, JobFailed):
        log.error("job_failed", **where, error_kind=event.error_kind, error=event.error,
                  duration_s=round(event.duration_s, 3))
    elif isinstance(event, CommitConflicted):
        log.info("commit_conflicted", **where, conflicts=event.conflicts, retries=event.retries)
    elif event.report.outcome == "skipped":
        log.info("job_skipped", **where, reason=event.report.detail)
    else:
        report = event.report
        log.info("job_finished", **where, outcome=report.outcome,
                 duration_s=round(event.duration_s, 3), read_rows=report.read_rows,
                 written_rows=report.written_rows, read_bytes=report.read_bytes,
                 written_bytes=report.written_bytes,
                 detail=report.detail.splitlines()[0] if report.detail else "")
