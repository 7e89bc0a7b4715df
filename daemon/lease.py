"""Per-table leases kept in the warehouse, so replicas never work on one table at once.

No lock service and no compare-and-swap: a lease is a sequence of files
``<warehouse>/_paimond/leases/<db.table>/lease-<epoch>``, each created exclusively (the same
primitive as snapshot commits: hard link locally, ``If-None-Match`` on S3). The newest epoch
decides. Taking over an expired lease, renewing and releasing all create the next epoch, so two
replicas racing for it cannot both win. A replica that dies stops renewing; its lease expires
after the TTL, except for the replica itself: a lease names its owner (the stable replica id,
``daemon.replica_id``) and the incarnation holding it (a token per process, with host and pid),
so a daemon restarted after a kill takes its own lease back at once when the incarnation that
held it is provably gone (another host, a pid that no longer runs here, or our own pid from an
earlier process: a restarted container). Two live daemons with one replica id on one host still
exclude each other; another replica always waits for expiry.

A table run costs two PUTs (acquire, release): acquiring again after our own release (or while
we hold the lease) creates ``our epoch + 1`` at once, without listing. It lists (and deletes old
epochs) after ``_UNLISTED_RUNS`` acquisitions without a LIST, or once our last write started
``_UNLISTED_FOR_S`` seconds ago, or when the create fails. That is sound only while that epoch cannot
have been created by someone else and deleted again, which a bare "it does not exist" cannot
tell. So old epochs are deleted only once the deleting instance listed them at least
``_OLD_EPOCH_AGE_S`` (twice the LIST-free window) before, and the window runs from a moment when
the epoch after ours provably had not been created yet (the LIST that showed the newest epoch,
or the start of our own last exclusive create): an epoch another replica created after ours is
still there for the whole window, so our create fails and we list as before. The window and the
age are durations on one instance's clock (a clock stepped by minutes could break that, as it
breaks the TTL). Replicas must all run this rule: an older one deletes old epochs at once.

Storage that disappears and comes back breaks "an epoch, once created, stays": so the
LIST-free path first checks that our own last epoch is still there (one HEAD: a directory or
bucket replaced, emptied or restored from a copy without it sends us to the LIST), and any
storage error in a lease operation forgets what this instance knew (``forget``: the next
acquisition lists), as does the daemon when it finds a warehouse unreachable. Locally the
storage never creates a warehouse root that is gone (table/storage/fsspec_storage.py), so no epoch is
created in an empty stand-in while the real one is away. A live holder whose epoch the storage
itself lost cannot know it until it lists again (at its next renewal past half the TTL): the
commit's conflict check is what protects the data then.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from paimond.errors import PaimondError
from paimond.faults import crash_point
from paimond.table.storage.interface import Storage

T = TypeVar("T")
LEASE_PREFIX = "lease-"
_CLEANUP_AT = 8  # old epochs gathered before one batched delete removes them
_UNLISTED_RUNS = 32  # acquisitions without a LIST between two that list (old epochs go then)
_UNLISTED_FOR_S = 300.0  # ... and for this long after the moment our next epoch was known free
_OLD_EPOCH_AGE_S = 2 * _UNLISTED_FOR_S  # an old epoch is deleted once listed this long ago
_LIVE_INCARNATIONS: set[str] = set()  # the incarnations this process holds leases as


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    epoch: int
    owner: str
    expires_at: float
    incarnation: str = ""
    host: str = ""
    pid: int = 0


@dataclass(frozen=True, slots=True)
class _Unlisted:
    """Our own last epoch, and when (this instance's clock) its successor was known not to
    have been created by anyone: as long as that is recent, a failed exclusive create of the
    successor is the only sign anybody moved past us."""
    epoch: int
    free_at: float
    runs: int  # acquisitions since the last LIST


class Leases:
    def __init__(self, storage: Storage, warehouse: str, owner: str, ttl_s: float,
                 clock: Callable[[], float]) -> None:
        self._storage, self._root = storage, storage.join(warehouse, "_paimond", "leases")
        self.owner, self.ttl_s, self._clock = owner, ttl_s, clock
        self.incarnation = uuid.uuid4().hex
        _LIVE_INCARNATIONS.add(self.incarnation)
        self._written: dict[str, LeaseRecord] = {}  # table -> the epoch this instance wrote last
        self._unlisted: dict[str, _Unlisted] = {}  # table -> what lets acquire skip the LIST
        self._seen: dict[str, dict[int, float]] = {}  # table -> epoch -> first listed at

    def forget(self) -> None:
        """Drop everything this instance knew of the epochs: the storage may have lost or
        replaced them, so the next acquisition, renewal or release lists first."""
        self._written.clear()
        self._unlisted.clear()
        self._seen.clear()

    def _forgetting(self, operation: Callable[[], T]) -> T:
        try:
            return operation()
        except BaseException:
            self.forget()
            raise

    def _dir(self, table: str) -> str:
        return self._storage.join(self._root, table)

    def _epochs(self, table: str) -> list[int]:
        epochs = sorted(int(s.name[len(LEASE_PREFIX):]) for s in self._storage.list_dir(self._dir(table))
                        if s.name.startswith(LEASE_PREFIX) and s.name[len(LEASE_PREFIX):].isdigit())
        listed_at, seen = self._clock(), self._seen.get(table, {})
        self._seen[table] = {epoch: seen.get(epoch, listed_at) for epoch in epochs}
        return epochs

    def current(self, table: str) -> LeaseRecord | None:
        return self._current(table, self._epochs(table))

    def _current(self, table: str, epochs: list[int], *, reread: bool = False
                 ) -> LeaseRecord | None:
        if not epochs:
            return None
        written = self._written.get(table)
        if not reread and written is not None and written.epoch == epochs[-1]:
            return written  # this instance wrote the newest epoch: no need to read it back
        path = self._storage.join(self._dir(table), f"{LEASE_PREFIX}{epochs[-1]}")
        try:
            raw = json.loads(self._storage.read_bytes(path))
            return LeaseRecord(epochs[-1], str(raw["owner"]), float(raw["expires_at"]),
                               str(raw.get("incarnation", "")), str(raw.get("host", "")),
                               int(raw.get("pid", 0)))
        except (PaimondError, ValueError, KeyError, TypeError):
            # Unreadable or vanished (cleaned up meanwhile): treat as expired, next epoch wins.
            return LeaseRecord(epochs[-1], "", 0.0)

    def _create(self, table: str, epoch: int, expires_at: float,
                listed: list[int] | None = None, *, free_at: float | None = None,
                runs: int = 0) -> bool:
        """``free_at``: when ``epoch`` was known not to have been created yet (None: unknown,
        the next acquisition lists)."""
        record = LeaseRecord(epoch, self.owner, expires_at, self.incarnation,
                             socket.gethostname(), os.getpid())
        body = json.dumps({"owner": record.owner, "expires_at": expires_at,
                           "incarnation": record.incarnation, "host": record.host,
                           "pid": record.pid}).encode()
        started = self._clock()
        self._unlisted.pop(table, None)
        created = self._storage.create_exclusive(
            self._storage.join(self._dir(table), f"{LEASE_PREFIX}{epoch}"), body)
        if created:
            self._written[table] = record
            self._seen.setdefault(table, {})[epoch] = self._clock()  # it exists by now
            if free_at is not None and self._clock() - free_at < _UNLISTED_FOR_S:
                # ours, created while no deleted epoch could be mistaken for a free one: the
                # next epoch can only be created after this create started
                self._unlisted[table] = _Unlisted(epoch, started, runs)
            crash_point("lease.epoch_created")
            if listed is not None:
                self._cleanup(table, epoch, listed)
        return created

    def _cleanup(self, table: str, newest: int, listed: list[int]) -> None:
        """Old epochs (all but the newest two) listed at least ``_OLD_EPOCH_AGE_S`` ago, once
        enough gathered to fill one batched delete."""
        now, seen = self._clock(), self._seen.get(table, {})
        old = [epoch for epoch in listed
               if epoch < newest - 1 and now - seen.get(epoch, now) >= _OLD_EPOCH_AGE_S]
        if len(old) < _CLEANUP_AT:
            return
        self._storage.delete_many(
            [self._storage.join(self._dir(table), f"{LEASE_PREFIX}{epoch}") for epoch in old],
            lambda _: crash_point("lease.old_epoch_deleted"))
        for epoch in old:
            seen.pop(epoch, None)

    def _unlisted_next(self, table: str, now: float) -> _Unlisted | None:
        """Our last epoch, if its successor may be created without listing first."""
        unlisted = self._unlisted.get(table)
        written = self._written.get(table)
        if unlisted is None or written is None or written.epoch != unlisted.epoch \
                or not 0 <= now - unlisted.free_at < _UNLISTED_FOR_S:
            return None
        return unlisted

    def acquire(self, table: str) -> bool:
        """Take (or renew) the lease; False if another live owner holds it or won the race."""
        return self._forgetting(lambda: self._acquire(table))

    def _acquire(self, table: str) -> bool:
        now = self._clock()
        unlisted = self._unlisted_next(table, now)
        if unlisted is not None and unlisted.runs < _UNLISTED_RUNS and self._storage.exists(
                self._storage.join(self._dir(table), f"{LEASE_PREFIX}{unlisted.epoch}")):
            # Nobody can have created and deleted the epoch after ours: if it is free, nobody
            # moved past our release (or our live lease). If it is taken, list as below.
            if self._create(table, unlisted.epoch + 1, now + self.ttl_s, free_at=now,
                            runs=unlisted.runs + 1) \
                    and self._clock() - unlisted.free_at < _OLD_EPOCH_AGE_S:
                return True  # (a create slower than that is checked by listing: it is ours)
        listed_at = self._clock()
        epochs = self._epochs(table)
        record = self._current(table, epochs)
        if record is not None and record.expires_at > now and not self._ours(record) \
                and not self._earlier_self(record):
            self._unlisted.pop(table, None)
            return False
        return self._create(table, (record.epoch if record else 0) + 1, now + self.ttl_s, epochs,
                            free_at=listed_at)

    def renew(self, table: str) -> bool:
        """Extend our lease; False if it is no longer ours (expired and taken over). While
        more than half its TTL remains it is extended later: nobody takes a live lease."""
        return self._forgetting(lambda: self._renew(table))

    def _renew(self, table: str) -> bool:
        written = self._written.get(table)
        if written is not None and self._ours(written) \
                and written.expires_at - self._clock() > self.ttl_s / 2:
            return True
        listed_at = self._clock()
        epochs = self._epochs(table)
        record = self._current(table, epochs, reread=True)
        if record is None or not self._ours(record):
            self._unlisted.pop(table, None)
            return False
        return self._create(table, record.epoch + 1, self._clock() + self.ttl_s, epochs,
                            free_at=listed_at)

    def release(self, table: str) -> None:
        self._forgetting(lambda: self._release(table))

    def _release(self, table: str) -> None:
        written = self._written.get(table)
        if written is not None and self._ours(written) and written.expires_at > 0:
            # the next epoch, created exclusively: if someone took the lease over, it is there
            # (and still is, within the LIST-free window: then the next acquisition needs no LIST)
            unlisted = self._unlisted_next(table, self._clock())
            self._create(table, written.epoch + 1, 0.0,
                         free_at=None if unlisted is None else unlisted.free_at,
                         runs=0 if unlisted is None else unlisted.runs)
            return
        record = self.current(table)
        if record is not None and self._ours(record):
            self._create(table, record.epoch + 1, 0.0)

    def _ours(self, record: LeaseRecord) -> bool:
        """Held by this very incarnation (a lease written before incarnations: by the owner)."""
        return record.owner == self.owner and record.incarnation in ("", self.incarnation)

    def _earlier_self(self, record: LeaseRecord) -> bool:
        """Held by an earlier, dead incarnation of this replica (restarted after a kill)."""
        if record.owner != self.owner or record.incarnation in _LIVE_INCARNATIONS:
            return False
        if record.host != socket.gethostname() or record.pid == os.getpid():
            return True
        try:
            os.kill(record.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
