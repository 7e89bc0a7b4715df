"""Two daemons on one warehouse whose storage disappears while they work and comes back
(#40): no two runs of one table ever overlap, nothing is created in place of the missing
warehouse, both say it is not ready while it is gone, and both work again once it is back.

The outage starts inside a running job (it moves the warehouse directory away, as an
unmounted volume or a restore would), so the job fails and its lease's release meets the
missing storage; the other daemon ticks during the outage; then the directory comes back.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pypaimon_tables import build_pk_deduplicate

from paimond.config.settings import load_settings
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance import jobs as registry_module

CYCLES = 20


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("outage") / "wh"
    build_pk_deduplicate(str(warehouse))
    return warehouse


def _daemon(warehouse: str, replica: str) -> Daemon:
    settings = load_settings(None, env={
        "PAIMOND_WAREHOUSE": warehouse, "PAIMOND_DAEMON_REPLICA_ID": replica,
        "PAIMOND_JOBS_EXPIRE_ENABLED": "false", "PAIMOND_JOBS_MERGE_MANIFESTS_ENABLED": "false",
        "PAIMOND_JOBS_COMPACT_INTERVAL_S": "1", "PAIMOND_DAEMON_BACKOFF_BASE_S": "0",
        "PAIMOND_DAEMON_QUARANTINE_AFTER": "1000"})
    return Daemon(settings, Metrics(CollectorRegistry()))


def _due(daemon: Daemon) -> None:
    """Every table due for compaction at the next tick (no interval, no skip, no backoff)."""
    for state in daemon.tables.values():
        state.last_run.clear()
        state.unchanged = None
        state.next_attempt_at = 0


def test_two_daemons_through_storage_outages_never_overlap(
        pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse, away = tmp_path / "wh", tmp_path / "wh-away"
    shutil.copytree(pristine, warehouse)
    lock = threading.Lock()
    active: dict[str, int] = {}
    overlaps: list[str] = []
    runs: list[str] = []
    outage = {"start": False, "gone": threading.Event()}
    original = registry_module.JOBS["compact"]

    def compact(table: Any, settings: Any, context: Any) -> Any:
        with lock:
            active[table.name] = active.get(table.name, 0) + 1
            if active[table.name] > 1:
                overlaps.append(table.name)
            runs.append(table.name)
            start_outage, outage["start"] = outage["start"], False
        try:
            if start_outage:  # the storage goes away under this running job
                os.rename(warehouse, away)
                outage["gone"].set()
            time.sleep(0.02)
            return original.run(table, settings, context)
        finally:
            with lock:
                active[table.name] -= 1

    monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                        dataclasses.replace(original, run=compact))
    daemons = [_daemon(str(warehouse), "a"), _daemon(str(warehouse), "b")]

    def tick_both() -> None:
        for d in daemons:
            _due(d)
        futures = [f for d in daemons for f in d.tick()]
        for future in futures:
            future.result()

    for cycle in range(CYCLES):
        tick_both()  # the warehouse is there: runs, leases
        outage["start"] = True
        outage["gone"].clear()
        tick_both()
        if not outage["gone"].is_set():  # the other daemon held the lease: start it here
            os.rename(warehouse, away)
        outage["start"] = False
        tick_both()  # both tick while it is gone
        assert not warehouse.exists(), f"cycle {cycle}: re-created: {sorted(warehouse.rglob('*'))}"
        assert all(d.unready_reason() for d in daemons), "ready while the warehouse is gone"
        os.rename(away, warehouse)  # it comes back as it was
        assert all(d.unready_reason() is None for d in daemons)
    tick_both()
    for d in daemons:
        d.shutdown(0)
    assert overlaps == [], f"overlapping runs: {overlaps}"
    assert len(runs) >= CYCLES, runs
