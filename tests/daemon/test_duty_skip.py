"""An unchanged table's duties are skipped (daemon.tables.duty_skip): a duty that did nothing
is not run again (no lease, no job) while the table's snapshot and schema stay the same, until
what it keeps may have grown old enough, at most an hour. Expiry held by
``snapshot.num-retained.min`` waits for a new snapshot; expiry held by
``snapshot.time-retained`` runs again when the next snapshot is old enough, and expires it
then. The table is written by pypaimon (write-only); the wall clock is the test's, started at
the real time the writer stamps on its snapshots."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pypaimon.schema.schema_change import SchemaChange
from support.pypaimon_tables import catalog_for
from support.stepping_clock import SteppingClock
from support.write_only_writer import Writer

from paimond.config.settings import load_settings
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance import jobs as registry_module
from paimond.maintenance.jobs import ROUTINE, ROUTINE_JOBS, Job, JobReport
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

NAME = "db.t"
WAIT_S = 60
DUTIES = ("expire", "tags")


@dataclasses.dataclass
class Setup:
    warehouse: str
    writer: Writer
    daemon: Daemon
    clock: SteppingClock
    ran: list[tuple[str, float]]  # (job, wall seconds) of each duty run
    leases: list[float]

    def tick(self, at_s: float) -> list[str]:
        """The duties that ran at this tick."""
        self.clock.at(at_s)
        before = len(self.ran)
        runs = [f.result(WAIT_S) for f in self.daemon.tick()]
        assert all(r.error is None for r in runs), runs
        return [job for job, _ in self.ran[before:]]

    def snapshot_ids(self) -> list[int]:
        table = open_table(open_storage(self.warehouse), self.warehouse, NAME)
        return table.snapshots.list_ids()


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    made: list[Setup] = []

    def make(options: dict[str, str], commits: int) -> Setup:
        warehouse = str(tmp_path / "wh")
        writer = Writer(warehouse, NAME, 5, options)
        for _ in range(commits):
            writer.commit()
        clock = SteppingClock(start_ms=int(time.time() * 1000))  # the writer's snapshots are "now"
        settings = load_settings(None, env={
            "PAIMOND_WAREHOUSE": warehouse, "PAIMOND_DAEMON_IDLE_CHECK_INTERVAL_S": "0",
            **{f"PAIMOND_JOBS_{job.upper()}_ENABLED": "false" for job in ROUTINE_JOBS
               if job not in DUTIES}}, jobs=ROUTINE)
        daemon = Daemon(settings, Metrics(CollectorRegistry(), clock), clock=clock)
        daemon.keep_up = True  # as `run` sets it
        ran: list[tuple[str, float]] = []
        leases: list[float] = []
        for name in DUTIES:
            real_job = registry_module.JOBS[name]

            def counting(table: Any, job_settings: Any, context: Any, real: Any = real_job
                         ) -> JobReport:
                ran.append((real.name, context.clock.wall_ms() / 1000))
                return real.run(table, job_settings, context)

            monkeypatch.setitem(registry_module.JOBS, name,  # type: ignore[arg-type]
                                Job(name, real_job.settings_type, counting,
                                    interval_s=real_job.interval_s))
        real_acquire = daemon.leases[0].acquire

        def acquire(table_name: str) -> bool:
            leases.append(clock.wall_ms() / 1000)
            return real_acquire(table_name)

        monkeypatch.setattr(daemon.leases[0], "acquire", acquire)
        made.append(Setup(warehouse, writer, daemon, clock, ran, leases))
        return made[-1]

    yield make
    for done in made:
        Lifecycle(done.daemon).shutdown(WAIT_S)


def test_expiry_held_by_the_retained_count_waits_for_a_new_snapshot(setup: Any) -> None:
    s = setup({}, commits=2)  # 2 snapshots, num-retained.min 10: nothing expires
    assert sorted(s.tick(0)) == ["expire", "tags"]  # expiry writes the EARLIEST hint only
    assert s.tick(300) == [], "nothing to do at the same snapshot"
    leases = len(s.leases)
    for at in (600, 900, 3000):
        assert s.tick(at) == [], f"skipped at {at} s: no job"
    assert len(s.leases) == leases, "and no lease"
    status = s.daemon.tables[NAME]
    assert set(status.quiet) == {"expire", "tags"}
    s.writer.commit()
    assert sorted(s.tick(3300)) == ["expire", "tags"], "a new snapshot runs them when due"
    assert s.tick(3600) == [], "and the new snapshot is remembered in turn"
    assert sorted(s.tick(3300 + 3600 + 300)) == ["expire", "tags"], "the hour's cap"


def test_expiry_held_by_age_runs_again_when_the_next_snapshot_is_old_enough(setup: Any) -> None:
    s = setup({"snapshot.num-retained.min": "1", "snapshot.time-retained": "30 min"},
              commits=3)
    assert "expire" in s.tick(0)
    assert s.snapshot_ids() == [1, 2, 3], "younger than 30 minutes"
    state = s.daemon.tables[NAME]
    held = state.quiet["expire"]
    second = open_table(open_storage(s.warehouse), s.warehouse, NAME).snapshots.load(2)
    assert held.until == (second.time_millis + 30 * 60_000 + 1) / 1000
    for at in (600, 900, 1500):
        assert "expire" not in s.tick(at)
    assert s.snapshot_ids() == [1, 2, 3]
    assert "expire" in s.tick(2100), "snapshot 2 is 35 minutes old: due again"
    assert s.snapshot_ids() == [3], "snapshots 1 and 2 expired"


def test_a_trigger_and_a_failure_forget_the_skips(setup: Any) -> None:
    s = setup({}, commits=1)
    s.tick(0)
    state = s.daemon.tables[NAME]
    assert state.quiet
    future = s.daemon.trigger(NAME)
    assert future is not None and future.result(WAIT_S).error is None
    assert state.quiet, "the triggered run found nothing to do again"
    s.daemon._failed(state, "RuntimeError: a failure")  # as a failed run records it
    assert not state.quiet


def test_each_duty_with_nothing_to_do_on_an_unchanged_table_says_so(tmp_path: Path) -> None:
    """The horizon each skippable duty reports (JobReport.quiet_until_ms) on a table with one
    snapshot and no option that ages anything: a new snapshot or schema alone changes it."""
    from paimond.clock import Clock
    from paimond.maintenance.jobs import JOBS, JobContext

    warehouse = str(tmp_path / "wh")
    Writer(warehouse, NAME, 5).commit()
    table = open_table(open_storage(warehouse), warehouse, NAME)
    context = JobContext(Clock(fixed_ms=int(time.time() * 1000)))
    quiet = {name: JOBS[name].run(table, JOBS[name].settings(), context).quiet_until_ms
             for name in ("expire", "tags", "merge_manifests", "expire_consumers",
                          "expire_partitions")}
    assert quiet == dict.fromkeys(quiet, math.inf)
    catalog_for(warehouse).alter_table(NAME, [SchemaChange.set_option(
        "consumer.expiration-time", "1 h")])
    table = open_table(open_storage(warehouse), warehouse, NAME)
    consumers = JOBS["expire_consumers"]
    assert consumers.run(table, consumers.settings(), context).quiet_until_ms == math.inf, (
        "no consumer yet")
    dry = JOBS["expire"].run(table, JOBS["expire"].settings(dry_run=True), context)
    assert dry.quiet_until_ms is None, "a dry run says nothing of later runs"
