"""Two daemons on one warehouse whose storage disappears while they work and comes back:
no two runs of one table ever overlap, nothing is created in place of the missing
warehouse, both say it is not ready while it is gone, and both work again once it is back.

The outage starts inside a running job (the warehouse directory moved away, as an unmounted
volume; on S3 on the loopback endpoint the bucket taken out of the endpoint's store, objects
and all), so the job fails and its lease's release meets the missing storage; the other daemon
ticks during the outage; then the directory, or the bucket with the same objects, comes back.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support.pypaimon_tables import build_pk_deduplicate
from support.s3_endpoint import S3Endpoint

from paimond.config.settings import load_settings
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance import jobs as registry_module
from paimond.maintenance.jobs import ROUTINE

CYCLES = 20


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("outage") / "wh"
    build_pk_deduplicate(str(warehouse))
    return warehouse


class LocalOutage:
    """The warehouse directory moved away and back, as an unmounted volume."""

    def __init__(self, pristine: Path, tmp_path: Path) -> None:
        self.warehouse, self.away = tmp_path / "wh", tmp_path / "wh-away"
        shutil.copytree(pristine, self.warehouse)
        self.uri, self.options = str(self.warehouse), "{}"

    def go(self) -> None:
        os.rename(self.warehouse, self.away)

    def recreated(self) -> list[str]:
        """What appeared where the warehouse was (nothing may)."""
        return sorted(str(p) for p in self.warehouse.rglob("*")) if self.warehouse.exists() \
            else []

    def come_back(self) -> None:
        os.rename(self.away, self.warehouse)


class S3Outage:
    """The bucket gone, objects and all, then back with the same objects."""

    def __init__(self, pristine: Path, s3: S3Endpoint) -> None:
        self.s3, self.fs, self.bucket = s3, s3._fs, f"outage-{uuid.uuid4().hex[:12]}"
        s3.make_bucket(self.bucket)
        for path in pristine.rglob("*"):
            if path.is_file():
                self.fs.pipe_file(f"{self.bucket}/wh/{path.relative_to(pristine)}",
                                  path.read_bytes())
        self.uri = f"s3://{self.bucket}/wh"
        # credentials come from the environment the endpoint's fixture set, as in production
        self.options = (f'{{ endpoint_url = "{s3.endpoint_url}", region = "{s3.region}" }}')
        self.taken: Any = None

    def go(self) -> None:
        self.taken = self.s3.take_away(self.bucket)
        self.fs.invalidate_cache()

    def recreated(self) -> list[str]:
        try:
            self.fs.call_s3("head_bucket", Bucket=self.bucket)
        except FileNotFoundError:
            return []
        return [f"the bucket {self.bucket}"]

    def come_back(self) -> None:
        self.s3.put_back(self.taken)
        self.fs.invalidate_cache()


Outage = LocalOutage | S3Outage


def _daemon(outage: Outage, replica: str, tmp_path: Path) -> Daemon:
    config = tmp_path / f"paimond-{replica}.toml"
    config.write_text(f'[[warehouses]]\nuri = "{outage.uri}"\n'
                      f"storage_options = {outage.options}\n")
    settings = load_settings(config, env={
        "PAIMOND_DAEMON_REPLICA_ID": replica,
        "PAIMOND_JOBS_EXPIRE_ENABLED": "false", "PAIMOND_JOBS_MERGE_MANIFESTS_ENABLED": "false",
        "PAIMOND_JOBS_COMPACT_INTERVAL_S": "1", "PAIMOND_DAEMON_BACKOFF_BASE_S": "0",
        "PAIMOND_DAEMON_QUARANTINE_AFTER": "1000"}, jobs=ROUTINE)
    return Daemon(settings, Metrics(CollectorRegistry()))


def _due(daemon: Daemon) -> None:
    """Every table due for compaction at the next tick (no interval, no skip, no backoff)."""
    for state in daemon.tables.values():
        state.last_run.clear()
        state.unchanged = None
        state.next_attempt_at = 0


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def outage(request: pytest.FixtureRequest, pristine: Path, tmp_path: Path) -> Outage:
    if request.param == "local":
        return LocalOutage(pristine, tmp_path)
    return S3Outage(pristine, request.getfixturevalue("s3_endpoint"))


def test_two_daemons_through_storage_outages_never_overlap(
        outage: Outage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = threading.Lock()
    active: dict[str, int] = {}
    overlaps: list[str] = []
    runs: list[str] = []
    starting = {"now": False, "gone": threading.Event()}
    original = registry_module.JOBS["compact"]

    def compact(table: Any, settings: Any, context: Any) -> Any:
        with lock:
            active[table.name] = active.get(table.name, 0) + 1
            if active[table.name] > 1:
                overlaps.append(table.name)
            runs.append(table.name)
            start_outage, starting["now"] = starting["now"], False
        try:
            if start_outage:  # the storage goes away under this running job
                outage.go()
                starting["gone"].set()
            time.sleep(0.02)
            return original.run(table, settings, context)
        finally:
            with lock:
                active[table.name] -= 1

    monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                        dataclasses.replace(original, run=compact))
    daemons = [_daemon(outage, "a", tmp_path), _daemon(outage, "b", tmp_path)]

    def tick_both() -> None:
        for d in daemons:
            _due(d)
        futures = [f for d in daemons for f in d.tick()]
        for future in futures:
            future.result()

    for cycle in range(CYCLES):
        tick_both()  # the warehouse is there: runs, leases
        starting["now"] = True
        starting["gone"].clear()
        tick_both()
        if not starting["gone"].is_set():  # no run started it: it goes now
            outage.go()
        starting["now"] = False
        tick_both()  # both tick while it is gone
        assert outage.recreated() == [], f"cycle {cycle}: created while gone"
        assert all(d.unready_reason() for d in daemons), "ready while the warehouse is gone"
        outage.come_back()  # it comes back as it was
        assert all(d.unready_reason() is None for d in daemons)
    tick_both()
    for d in daemons:
        Lifecycle(d).shutdown(0)
    assert overlaps == [], f"overlapping runs: {overlaps}"
    # each cycle ran a job while the warehouse was there (the one that took it away)
    assert len(runs) >= CYCLES - 1, f"{len(runs)} runs in {CYCLES} cycles: too few to tell"
