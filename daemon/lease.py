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
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from paimond.errors import PaimondError
from paimond.faults import crash_point
from paimond.table.storage import Storage

LEASE_PREFIX = "lease-"
_CLEANUP_AT = 8  # old epochs gathered before one batched delete removes them
_LIVE_INCARNATIONS: set[str] = set()  # the incarnations this process holds leases as


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    epoch: int
    owner: str
    expires_at: float
    incarnation: str = ""
    host: str = ""
    pid: int = 0


class Leases:
    def __init__(self, storage: Storage, warehouse: str, owner: str, ttl_s: float,
                 clock: Callable[[], float]) -> None:
        self._storage, self._root = storage, storage.join(warehouse, "_paimond", "leases")
        self.owner, self.ttl_s, self._clock = owner, ttl_s, clock
        self.incarnation = uuid.uuid4().hex
        _LIVE_INCARNATIONS.add(self.incarnation)
        self._written: dict[str, LeaseRecord] = {}  # table -> the epoch this instance wrote last

    def _dir(self, table: str) -> str:
        return self._storage.join(self._root, table)

    def _epochs(self, table: str) -> list[int]:
        return sorted(int(s.name[len(LEASE_PREFIX):]) for s in self._storage.list_dir(self._dir(table))
                      if s.name.startswith(LEASE_PREFIX) and s.name[len(LEASE_PREFIX):].isdigit())

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
                listed: list[int] | None = None) -> bool:
        record = LeaseRecord(epoch, self.owner, expires_at, self.incarnation,
                             socket.gethostname(), os.getpid())
        body = json.dumps({"owner": record.owner, "expires_at": expires_at,
                           "incarnation": record.incarnation, "host": record.host,
                           "pid": record.pid}).encode()
        created = self._storage.create_exclusive(
            self._storage.join(self._dir(table), f"{LEASE_PREFIX}{epoch}"), body)
        if created:
            self._written[table] = record
            crash_point("lease.epoch_created")
            if listed is not None:
                self._cleanup(table, epoch, listed)
        return created

    def _cleanup(self, table: str, newest: int, listed: list[int]) -> None:
        """Old epochs (all but the newest two), once enough gathered to fill one batched
        delete: a table run then costs one LIST and two PUTs, not a LIST and a DELETE more."""
        old = [epoch for epoch in listed if epoch < newest - 1]
        if len(old) < _CLEANUP_AT:
            return
        self._storage.delete_many(
            [self._storage.join(self._dir(table), f"{LEASE_PREFIX}{epoch}") for epoch in old],
            lambda _: crash_point("lease.old_epoch_deleted"))

    def acquire(self, table: str) -> bool:
        """Take (or renew) the lease; False if another live owner holds it or won the race."""
        now = self._clock()
        epochs = self._epochs(table)
        record = self._current(table, epochs)
        if record is not None and record.expires_at > now and not self._ours(record) \
                and not self._earlier_self(record):
            return False
        return self._create(table, (record.epoch if record else 0) + 1, now + self.ttl_s, epochs)

    def renew(self, table: str) -> bool:
        """Extend our lease; False if it is no longer ours (expired and taken over). While
        more than half its TTL remains it is extended later: nobody takes a live lease."""
        written = self._written.get(table)
        if written is not None and self._ours(written) \
                and written.expires_at - self._clock() > self.ttl_s / 2:
            return True
        epochs = self._epochs(table)
        record = self._current(table, epochs, reread=True)
        if record is None or not self._ours(record):
            return False
        return self._create(table, record.epoch + 1, self._clock() + self.ttl_s, epochs)

    def release(self, table: str) -> None:
        written = self._written.get(table)
        if written is not None and self._ours(written) and written.expires_at > 0:
            # the next epoch, created exclusively: if someone took the lease over, it is there
            self._create(table, written.epoch + 1, 0.0)
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
