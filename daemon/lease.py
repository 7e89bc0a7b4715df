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

    def _dir(self, table: str) -> str:
        return self._storage.join(self._root, table)

    def current(self, table: str) -> LeaseRecord | None:
        epochs = sorted(int(s.name[len(LEASE_PREFIX):]) for s in self._storage.list_dir(self._dir(table))
                        if s.name.startswith(LEASE_PREFIX) and s.name[len(LEASE_PREFIX):].isdigit())
        if not epochs:
            return None
        path = self._storage.join(self._dir(table), f"{LEASE_PREFIX}{epochs[-1]}")
        try:
            raw = json.loads(self._storage.read_bytes(path))
            return LeaseRecord(epochs[-1], str(raw["owner"]), float(raw["expires_at"]),
                               str(raw.get("incarnation", "")), str(raw.get("host", "")),
                               int(raw.get("pid", 0)))
        except (PaimondError, ValueError, KeyError, TypeError):
            # Unreadable or vanished (cleaned up meanwhile): treat as expired, next epoch wins.
            return LeaseRecord(epochs[-1], "", 0.0)

    def _create(self, table: str, epoch: int, expires_at: float) -> bool:
        body = json.dumps({"owner": self.owner, "expires_at": expires_at,
                           "incarnation": self.incarnation, "host": socket.gethostname(),
                           "pid": os.getpid()}).encode()
        created = self._storage.create_exclusive(
            self._storage.join(self._dir(table), f"{LEASE_PREFIX}{epoch}"), body)
        if created:
            crash_point("lease.epoch_created")
            self._cleanup(table, epoch)
        return created

    def _cleanup(self, table: str, newest: int) -> None:
        for status in self._storage.list_dir(self._dir(table)):
            suffix = status.name[len(LEASE_PREFIX):]
            if status.name.startswith(LEASE_PREFIX) and suffix.isdigit() and int(suffix) < newest - 1:
                self._storage.delete(status.path)
                crash_point("lease.old_epoch_deleted")

    def acquire(self, table: str) -> bool:
        """Take (or renew) the lease; False if another live owner holds it or won the race."""
        now = self._clock()
        record = self.current(table)
        if record is not None and record.expires_at > now and not self._ours(record) \
                and not self._earlier_self(record):
            return False
        return self._create(table, (record.epoch if record else 0) + 1, now + self.ttl_s)

    def renew(self, table: str) -> bool:
        """Extend our lease; False if it is no longer ours (expired and taken over)."""
        record = self.current(table)
        if record is None or not self._ours(record):
            return False
        return self._create(table, record.epoch + 1, self._clock() + self.ttl_s)

    def release(self, table: str) -> None:
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
