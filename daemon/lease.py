"""Per-table leases kept in the warehouse, so replicas never work on one table at once.

No lock service and no compare-and-swap: a lease is a sequence of files
``<warehouse>/_paimond/leases/<db.table>/lease-<epoch>``, each created exclusively (the same
primitive as snapshot commits: hard link locally, ``If-None-Match`` on S3). The newest epoch
decides. Taking over an expired lease, renewing and releasing all create the next epoch, so two
replicas racing for it cannot both win. A replica that dies stops renewing; its lease expires
after the TTL.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from paimond.errors import PaimondError
from paimond.table.storage import Storage

LEASE_PREFIX = "lease-"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    epoch: int
    owner: str
    expires_at: float


class Leases:
    def __init__(self, storage: Storage, warehouse: str, owner: str, ttl_s: float,
                 clock: Callable[[], float]) -> None:
        self._storage, self._root = storage, storage.join(warehouse, "_paimond", "leases")
        self.owner, self.ttl_s, self._clock = owner, ttl_s, clock

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
            return LeaseRecord(epochs[-1], str(raw["owner"]), float(raw["expires_at"]))
        except (PaimondError, ValueError, KeyError, TypeError):
            # Unreadable or vanished (cleaned up meanwhile): treat as expired, next epoch wins.
            return LeaseRecord(epochs[-1], "", 0.0)

    def _create(self, table: str, epoch: int, expires_at: float) -> bool:
        body = json.dumps({"owner": self.owner, "expires_at": expires_at}).encode()
        created = self._storage.create_exclusive(
            self._storage.join(self._dir(table), f"{LEASE_PREFIX}{epoch}"), body)
        if created:
            self._cleanup(table, epoch)
        return created

    def _cleanup(self, table: str, newest: int) -> None:
        for status in self._storage.list_dir(self._dir(table)):
            suffix = status.name[len(LEASE_PREFIX):]
            if status.name.startswith(LEASE_PREFIX) and suffix.isdigit() and int(suffix) < newest - 1:
                self._storage.delete(status.path)

    def acquire(self, table: str) -> bool:
        """Take (or renew) the lease; False if another live owner holds it or won the race."""
        now = self._clock()
        record = self.current(table)
        if record is not None and record.owner != self.owner and record.expires_at > now:
            return False
        return self._create(table, (record.epoch if record else 0) + 1, now + self.ttl_s)

    def renew(self, table: str) -> bool:
        """Extend our lease; False if it is no longer ours (expired and taken over)."""
        record = self.current(table)
        if record is None or record.owner != self.owner:
            return False
        return self._create(table, record.epoch + 1, self._clock() + self.ttl_s)

    def release(self, table: str) -> None:
        record = self.current(table)
        if record is not None and record.owner == self.owner:
            self._create(table, record.epoch + 1, 0.0)
