"""An unchanged table's periodic compaction is skipped (daemon.tables.compact_skip): after a
compaction that found nothing to do, the table is not planned again (no lease, no plan) while its
snapshot and schema stay the same, until the next moment a time-dependent input of the planners
may change the plan. A new snapshot, an options change, a trigger, the hour's cap, an off-peak
boundary plan again; options whose plans depend on the clock never skip. The table is written by
pypaimon (write-only); the wall clock is the test's."""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pypaimon.schema.schema_change import SchemaChange
from structlog.testing import capture_logs
from support.pypaimon_tables import catalog_for
from support.stepping_clock import SteppingClock
from support.write_only_writer import Writer

from paimond.config.settings import load_settings
from paimond.daemon.http.control import Control
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import TableRun
from paimond.daemon.service import Daemon
from paimond.daemon.tables import compact_skip
from paimond.maintenance import jobs as registry_module
from paimond.maintenance.jobs import ROUTINE, ROUTINE_JOBS, Job, JobReport
from paimond.table.catalog import open_table
from paimond.table.status.report import table_status
from paimond.table.storage.interface import open_storage

NAME = "db.t"
WAIT_S = 60
# a local date-time half an hour before a local hour boundary (off-peak hours are local)
START = datetime.datetime(2026, 1, 5, 21, 30)
START_MS = int(START.timestamp() * 1000)




@dataclasses.dataclass
class Setup:
    warehouse: str
    writer: Writer
    daemon: Daemon
    clock: SteppingClock
    plans: list[float]  # wall seconds of each compaction job run
    leases: list[str]

    def tick(self, at_s: float) -> list[TableRun]:
        self.clock.at(at_s)
        runs = [f.result(WAIT_S) for f in self.daemon.tick()]
        assert all(r.error is None for r in runs), runs
        return runs

    def set_option(self, key: str, value: str) -> None:
        catalog_for(self.warehouse).alter_table(NAME, [SchemaChange.set_option(key, value)])

    def why(self) -> str:
        entry: Any = Control(self.daemon).status()[NAME]
        return str(entry["jobs"]["compact"]["why"])


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    made: list[Setup] = []

    def make(options: dict[str, str] | None = None, trigger: int = 5) -> Setup:
        warehouse = str(tmp_path / "wh")
        writer = Writer(warehouse, NAME, trigger, options)
        writer.commit()  # one sorted run: nothing to compact
        clock = SteppingClock(START_MS)
        # every tick checks the table, however long it stood still: what a tick decides
        settings = load_settings(None, env={
            "PAIMOND_WAREHOUSE": warehouse, "PAIMOND_DAEMON_IDLE_CHECK_INTERVAL_S": "0",
            **{f"PAIMOND_JOBS_{job.upper()}_ENABLED": "false" for job in ROUTINE_JOBS
               if job != "compact"}}, jobs=ROUTINE)
        daemon = Daemon(settings, Metrics(CollectorRegistry(), clock), clock=clock)
        daemon.keep_up = True  # as `run` sets it
        plans: list[float] = []
        leases: list[str] = []
        real_job = registry_module.JOBS["compact"]

        def counting(table: Any, job_settings: Any, context: Any) -> JobReport:
            plans.append(context.clock.wall_ms() / 1000)
            return real_job.run(table, job_settings, context)

        monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                            Job("compact", real_job.settings_type, counting))
        real_acquire = daemon.leases[0].acquire

        def acquire(name: str) -> bool:
            leases.append(name)
            return real_acquire(name)

        monkeypatch.setattr(daemon.leases[0], "acquire", acquire)
        made.append(Setup(warehouse, writer, daemon, clock, plans, leases))
        return made[-1]

    yield make
    for done in made:
        Lifecycle(done.daemon).shutdown(WAIT_S)


def _levels(warehouse: str) -> list[int]:
    table = open_table(open_storage(warehouse), warehouse, NAME)
    return sorted(lv.level for b in table_status(table, verify_files=False).buckets
                  for lv in b.levels if lv.files)


def test_an_unchanged_table_is_not_planned_again_until_a_new_snapshot(setup: Any) -> None:
    s = setup()
    runs = s.tick(0)
    assert [r.reports["compact"].outcome for r in runs] == ["success"]
    assert len(s.plans) == 1 and len(s.leases) == 1
    with capture_logs() as logs:
        assert s.tick(61) == [], "skipped: no lease, no plan"
    assert [(e["event"], e["snapshot_id"]) for e in logs if e["log_level"] == "debug"] == [
        ("compaction_skipped", 1)]
    with capture_logs() as logs:
        for at in (122, 600):
            assert s.tick(at) == []
    assert not [e for e in logs if e["event"] == "compaction_skipped"], "told once per skip"
    assert len(s.plans) == 1 and len(s.leases) == 1
    assert "unchanged since snapshot 1" in s.why()
    s.writer.commit()
    assert len(s.tick(601)) == 1, "a new snapshot plans at once"
    assert len(s.plans) == 2 and len(s.leases) == 2
    assert s.tick(700) == [], "and the new snapshot is remembered in turn"
    assert "unchanged since snapshot 2" in s.why()


def test_the_skip_lasts_at_most_an_hour(setup: Any) -> None:
    s = setup()
    s.tick(0)
    assert s.tick(3599) == [] and len(s.plans) == 1
    assert len(s.tick(3659)) == 1 and len(s.plans) == 2, "the hour's cap (dead job records)"
    assert s.tick(3720) == [], "remembered again"


def test_an_options_change_plans_again(setup: Any) -> None:
    s = setup()
    s.tick(0)
    assert s.tick(61) == []
    s.set_option("num-sorted-run.compaction-trigger", "6")  # a new schema, no new snapshot
    # the watcher looks up the next schema at most once a minute (watch.SCHEMA_CHECK_MS)
    assert len(s.tick(122)) == 1 and len(s.plans) == 2
    assert s.tick(183) == [], "the new schema is remembered"
    assert "schema 1" in s.why()


def test_a_trigger_plans_and_a_failure_forgets(setup: Any, monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    s = setup()
    s.tick(0)
    assert s.tick(61) == []
    future = s.daemon.trigger(NAME)
    assert future is not None and future.result(WAIT_S).error is None
    assert len(s.plans) == 2, "a manual trigger runs the compaction"
    assert s.tick(122) == []
    state = s.daemon.tables[NAME]
    assert state.unchanged is not None
    s.daemon._failed(state, "RuntimeError: a failure")  # as a failed run records it
    assert state.unchanged is None


def test_off_peak_hours_end_the_skip_at_the_next_local_hour(setup: Any) -> None:
    s = setup({"compaction.offpeak.start.hour": "22", "compaction.offpeak.end.hour": "6",
               "compaction.offpeak-ratio": "20"})
    s.tick(0)  # 21:30 local
    assert s.tick(61) == [] and s.tick(1799) == [], "skipped within the hour"
    unchanged = s.daemon.tables[NAME].unchanged
    assert unchanged is not None and unchanged.until == START_MS / 1000 + 1800
    assert len(s.tick(1860)) == 1 and len(s.plans) == 2, "22:00 local: off-peak began"


@pytest.mark.parametrize("options", [
    {"record-level.expire-time": "1 d", "record-level.time-field": "id"},
    {"compaction.optimization-interval": "1 h"},
    {"compaction.skip-expired-partitions": "true"},
], ids=["record-level-expiry", "optimization-interval", "skip-expired-partitions"])
def test_options_whose_plan_reads_the_clock_are_never_skipped(setup: Any,
                                                              options: dict[str, str]) -> None:
    s = setup(options)
    s.tick(0)
    assert s.daemon.tables[NAME].unchanged is None
    assert len(s.tick(61)) == 1 and len(s.plans) == 2


def test_gentle_lookup_attempts_are_counted_at_every_interval(setup: Any) -> None:
    """Each empty pick counts; the max-interval-th pushes level 0 up: skipping would stop the
    count (Java's writers count at every compaction they trigger)."""
    s = setup({"force-lookup": "true", "lookup-compact": "gentle",
               "lookup-compact.max-interval": "2"}, trigger=2)
    s.tick(0)
    assert _levels(s.warehouse) == [0], "attempt 1: nothing"
    assert s.daemon.tables[NAME].unchanged is None
    assert len(s.tick(61)) == 1, "attempt 2 is planned"
    assert _levels(s.warehouse) and 0 not in _levels(s.warehouse), "and forced level 0 up"


def test_the_horizon_of_each_time_dependent_input(setup: Any) -> None:
    started = START_MS / 1000
    local = START.replace(minute=59, second=30)
    warehouse = setup().warehouse
    schema = open_table(open_storage(warehouse), warehouse, NAME).latest_schema()

    def until(options: dict[str, str], window: tuple[int, int] | None = None,
              before: dict[object, object] | None = None,
              after: dict[object, object] | None = None) -> tuple[float, str] | None:
        return compact_skip.unchanged_until(dataclasses.replace(schema, options=options),
                                            started, local, window, before or {}, after or {})

    assert until({}) == (started + 3600, "at most 3600 s")
    offpeak = {"compaction.offpeak.start.hour": "22", "compaction.offpeak.end.hour": "6",
               "compaction.offpeak-ratio": "20"}
    horizon = until(offpeak)
    assert horizon is not None and horizon[0] == started + 30, "local 21:59:30: 30 s left"
    assert until({**offpeak, "compaction.offpeak-ratio": "0"}) == (started + 3600,
                                                                    "at most 3600 s")
    assert until({}, before={"b": 1}, after={"b": 2}) is None, "a gentle count moved"
    assert until({}, before={"b": 0}, after={"b": 0}) is not None
    # a policy's full-compaction window (UTC minutes of the day): until its next start
    day = started - started % 86_400
    in_ten_minutes = int((started - day) // 60) + 10
    horizon = until({}, window=(in_ten_minutes, in_ten_minutes + 60))
    assert horizon is not None and horizon[0] == day + in_ten_minutes * 60
    assert horizon[1] == "the full-compaction window"
    assert compact_skip.next_window_start((60, 120), day + 60 * 60) == day + 86_400 + 3600
    for options in ({"record-level.expire-time": "1 d", "record-level.time-field": "id"},
                    {"compaction.optimization-interval": "1 h"},
                    {"compaction.skip-expired-partitions": "true"}):
        assert until(options) is None, options
