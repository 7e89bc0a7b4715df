"""Consumer expiration: Java ``ConsumerManager.expire`` and its trigger in
``TableCommitImpl.maintain`` (apache/paimon 5dacde516b).

A streaming reader records its progress in ``<table>/consumer/consumer-<id>`` (JSON
``{"nextSnapshot": N}``); snapshot expiration keeps every snapshot from the smallest
``nextSnapshot`` on. A writer commits with ``consumer.expiration-time`` set deletes the
consumer files not modified for that long, before it expires snapshots; writers with
``write-only=true`` skip that, so a dead reader would pin every snapshot for ever. This job
does it for them.

Java compares local date-times: ``LocalDateTime.now() - expiration`` against the file's
modification time (milliseconds) in the default zone, and deletes when the cut-off is strictly
after it. The file's content is not read to decide (an unparsable file expires too). A
branch's consumers live under its own directory and expire with that branch's options, when
the job runs on the branch.
"""

from __future__ import annotations

import datetime
import json
import math
from dataclasses import dataclass

from paimond.clock import Clock
from paimond.errors import MissingFileError
from paimond.faults import crash_point
from paimond.table.catalog import Table
from paimond.table.layout import CONSUMER_DIR, CONSUMER_PREFIX


@dataclass(frozen=True, slots=True)
class ConsumerFile:
    consumer_id: str
    path: str
    next_snapshot: int | None  # None: the file does not parse (Java expires it all the same)
    modified_ms: int | None  # None: the storage gave no modification time (never expired)


@dataclass(frozen=True, slots=True)
class ConsumerExpirePlan:
    table_name: str
    expiration_ms: int | None  # None: consumer.expiration-time unset and no override
    cutoff: datetime.datetime | None  # local date-time; files modified before it expire
    consumers: tuple[ConsumerFile, ...]
    expired: tuple[ConsumerFile, ...]


@dataclass(frozen=True, slots=True)
class ConsumerExpireResult:
    plan: ConsumerExpirePlan
    deleted: tuple[str, ...]  # consumer ids whose file this run deleted
    dry_run: bool = False

    def quiet_until_ms(self) -> float | None:
        """Nothing expired: a rerun expires nothing before the oldest consumer file's age
        passes ``consumer.expiration-time`` (wall ms; inf: unset, or no consumer). None: this
        run expired some."""
        plan = self.plan
        if self.dry_run or plan.expired:
            return None
        if plan.expiration_ms is None:
            return math.inf
        ages = [c.modified_ms for c in plan.consumers if c.modified_ms is not None]
        return min(ages) + plan.expiration_ms + 1 if ages else math.inf

    def describe(self) -> str:
        plan = self.plan
        if plan.expiration_ms is None:
            return (f"{plan.table_name}: consumer.expiration-time is not set; "
                    f"{len(plan.consumers)} consumers kept")
        lines = [f"{plan.table_name}: {len(plan.consumers)} consumers, files modified before "
                 f"{plan.cutoff} expire"]
        expired = {c.consumer_id for c in plan.expired}
        for consumer in plan.consumers:
            if consumer.consumer_id in expired:
                state = "would expire" if self.dry_run else (
                    "expired" if consumer.consumer_id in self.deleted else "kept (changed meanwhile)")
            else:
                state = "kept"
            lines.append(f"  {consumer.consumer_id}: next snapshot {consumer.next_snapshot}, "
                         f"modified {_local(consumer.modified_ms)} - {state}")
        return "\n".join(lines)


def _local(modified_ms: int | None) -> datetime.datetime | None:
    """Java ``DateTimeUtils.toLocalDateTime(millis)``: the default zone's wall time."""
    if modified_ms is None:
        return None
    return datetime.datetime.fromtimestamp(modified_ms / 1000)


def _millis(mtime_s: float) -> int:
    """Whole milliseconds, as Java's ``FileStatus.getModificationTime`` (via microseconds,
    so that a float just under an exact millisecond does not lose it)."""
    return round(mtime_s * 1_000_000) // 1000


def _next_snapshot(data: bytes) -> int | None:
    try:
        value = json.loads(data)["nextSnapshot"]
    except (ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def list_consumers(table: Table) -> tuple[ConsumerFile, ...]:
    """The table's branch's consumer files, by id. A file that vanishes while listed is left out."""
    found = []
    for status in table.storage.list_dir(table.meta_file_path(CONSUMER_DIR)):
        if status.is_dir or not status.name.startswith(CONSUMER_PREFIX):
            continue
        try:
            data = table.storage.read_bytes(status.path)
        except MissingFileError:
            continue
        modified = None if status.mtime_s is None else _millis(status.mtime_s)
        found.append(ConsumerFile(status.name[len(CONSUMER_PREFIX):], status.path,
                                  _next_snapshot(data), modified))
    return tuple(sorted(found, key=lambda c: c.consumer_id))


def is_expired(consumer: ConsumerFile, cutoff: datetime.datetime) -> bool:
    """Java ``expireDateTime.isAfter(modificationTime)``."""
    modified = _local(consumer.modified_ms)
    return modified is not None and cutoff > modified


def plan_consumer_expiry(table_name: str, consumers: tuple[ConsumerFile, ...],
                         expiration_ms: int | None, local_now: datetime.datetime
                         ) -> ConsumerExpirePlan:
    """Which consumers expire, from their listing and the moment alone."""
    if expiration_ms is None:
        return ConsumerExpirePlan(table_name, None, None, consumers, ())
    cutoff = local_now - datetime.timedelta(milliseconds=expiration_ms)
    expired = tuple(c for c in consumers if is_expired(c, cutoff))
    return ConsumerExpirePlan(table_name, expiration_ms, cutoff, consumers, expired)


class ConsumerExpireJob:
    """List, plan, delete. ``older_than_ms`` overrides ``consumer.expiration-time``."""

    def __init__(self, table: Table, *, clock: Clock, older_than_ms: int | None = None,
                 dry_run: bool = False) -> None:
        self.table, self.clock, self.dry_run = table, clock, dry_run
        self.older_than_ms = older_than_ms

    def plan(self) -> ConsumerExpirePlan:
        expiration = self.older_than_ms
        if expiration is None:
            expiration = self.table.options().consumer_expiration_time_ms
        return plan_consumer_expiry(self.table.name, list_consumers(self.table), expiration,
                                    self.clock.local_now())

    def run(self) -> ConsumerExpireResult:
        plan = self.plan()
        if self.dry_run or plan.cutoff is None:
            return ConsumerExpireResult(plan, (), self.dry_run)
        deleted = []
        storage = self.table.storage
        for consumer in plan.expired:
            # A reader that advanced since the listing rewrote its file: it is alive again
            # (Java decides on its one listing; this narrows the race, it cannot close it).
            try:
                mtime_s = storage.mtime(consumer.path)
            except MissingFileError:
                continue  # deleted meanwhile (Java deletes quietly)
            if mtime_s is None or not is_expired(
                    ConsumerFile(consumer.consumer_id, consumer.path, None, _millis(mtime_s)),
                    plan.cutoff):
                continue
            if storage.delete(consumer.path):
                deleted.append(consumer.consumer_id)
            crash_point("expire_consumers.consumer_deleted")
        return ConsumerExpireResult(plan, tuple(deleted))
