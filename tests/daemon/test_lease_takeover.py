"""Lease takeover after a kill: a daemon restarted under the same replica id takes its own
lease back at once (its earlier incarnation is provably gone: a pid that no longer runs here,
our own pid from an earlier process, another host), while a different replica, or a second
live daemon of the same replica on this host, still waits for the lease to expire."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry

from paimond.config.settings import load_settings
from paimond.daemon.lease import Leases
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance.jobs import ROUTINE
from paimond.table.storage.interface import open_storage

TTL_S = 120.0


def _lease_path(warehouse: Path, table: str) -> Path:
    return warehouse / "_paimond" / "leases" / table


def _killed_holder(warehouse: Path, owner: str, now: float) -> None:
    """A daemon process that took the lease and was then killed (it never released it)."""
    code = ("import sys; from paimond.daemon.lease import Leases; "
            "from paimond.table.storage.interface import open_storage; "
            f"s = open_storage({str(warehouse)!r}); "
            f"assert Leases(s, s.root, {owner!r}, {TTL_S}, lambda: {now}).acquire('db.t')")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_restarted_daemon_takes_its_own_lease_back_at_once(tmp_path: Path) -> None:
    now = [1000.0]
    _killed_holder(tmp_path, "paimond-0", now[0])
    storage = open_storage(str(tmp_path))
    other = Leases(storage, storage.root, "paimond-1", TTL_S, lambda: now[0])
    assert not other.acquire("db.t"), "another replica waits for expiry"
    restarted = Leases(storage, storage.root, "paimond-0", TTL_S, lambda: now[0])
    assert restarted.acquire("db.t") and restarted.renew("db.t")
    assert not other.acquire("db.t")
    lease = restarted.current("db.t")
    assert lease is not None and lease.incarnation == restarted.incarnation


def test_same_replica_live_on_this_host_still_waits(tmp_path: Path) -> None:
    now = [1000.0]
    storage = open_storage(str(tmp_path))
    first = Leases(storage, storage.root, "paimond-0", TTL_S, lambda: now[0])
    second = Leases(storage, storage.root, "paimond-0", TTL_S, lambda: now[0])
    assert first.acquire("db.t") and not second.acquire("db.t")
    assert not second.renew("db.t") and first.renew("db.t")
    now[0] += TTL_S + 1
    assert second.acquire("db.t") and not first.renew("db.t")


def test_an_earlier_incarnation_with_our_pid_or_on_another_host(tmp_path: Path) -> None:
    """A restarted container runs as the same pid (1) as the killed one; a pod rescheduled
    elsewhere keeps its replica id but not its host."""
    now = [1000.0]
    storage = open_storage(str(tmp_path))
    holder = Leases(storage, storage.root, "paimond-0", TTL_S, lambda: now[0])
    for host, pid in ((socket.gethostname(), None), ("another-node", 1)):
        assert holder.acquire("db.t")
        lease = holder.current("db.t")
        assert lease is not None
        path = _lease_path(tmp_path, "db.t") / f"lease-{lease.epoch}"
        raw = json.loads(path.read_text())
        path.write_text(json.dumps(raw | {"incarnation": "killed", "host": host,
                                          "pid": raw["pid"] if pid is None else pid}))
        restarted = Leases(storage, storage.root, "paimond-0", TTL_S, lambda: now[0])
        now[0] += TTL_S / 2 + 1  # a renewal reads the lease again once half its TTL is gone
        assert not holder.renew("db.t")
        assert not Leases(storage, storage.root, "paimond-1", TTL_S, lambda: now[0]).acquire("db.t")
        assert restarted.acquire("db.t")
        holder = restarted


def test_the_daemon_holds_leases_as_its_replica(tmp_path: Path) -> None:
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": str(tmp_path),
                                        "POD_NAME": "paimond-7"}, jobs=ROUTINE)
    daemon = Daemon(settings, Metrics(CollectorRegistry()))
    assert daemon.owner == "paimond-7" and daemon.leases[0].owner == "paimond-7"
