"""A run that loses its table's lease (it expired and another replica took it) starts no job
more: its commits would race the new holder's. The run ends without an error (the table did
not fail), says so in a log event, and leaves the lease alone (release is for our own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support.write_only_writer import Writer

from paimond.config.settings import load_settings
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import TableWork
from paimond.daemon.service import Daemon
from paimond.maintenance import jobs as registry_module
from paimond.maintenance.jobs import ROUTINE, CompactSettings, ExpireOverrides, Job, JobReport
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

NAME = "db.t"


class _Said:
    def describe(self) -> str:
        return "done"


@pytest.mark.parametrize("renewals_granted", [0, 1])
def test_a_run_stops_once_its_lease_is_taken_over(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  renewals_granted: int) -> None:
    warehouse = str(tmp_path / "wh")
    Writer(warehouse, NAME, 3).commit()
    table = open_table(open_storage(warehouse), warehouse, NAME)
    daemon = Daemon(load_settings(None, env={"PAIMOND_WAREHOUSE": warehouse}, jobs=ROUTINE),
                    Metrics(CollectorRegistry()))
    ran: list[str] = []

    def job(name: str) -> Any:
        def run(table: Any, settings: Any, context: Any) -> JobReport:
            ran.append(name)
            return JobReport(_Said())
        return run

    monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                        Job("compact", CompactSettings, job("compact")))
    monkeypatch.setitem(registry_module.JOBS, "expire",  # type: ignore[arg-type]
                        Job("expire", ExpireOverrides, job("expire")))
    leases = daemon.runner.leases[0]
    granted = iter([True] * renewals_granted)
    monkeypatch.setattr(leases, "renew", lambda table: next(granted, False))
    released: list[str] = []
    monkeypatch.setattr(leases, "release", released.append)
    jobs = ("compact", "expire", "compact")

    run = daemon.runner.run_table(TableWork(table, 0, jobs, None, {}))
    Lifecycle(daemon).shutdown(0)

    assert ran == list(jobs[:renewals_granted + 1])  # the job that ran when the lease was lost
    assert run.error is None
    assert released == [NAME]  # release checks that the lease is ours before it writes
