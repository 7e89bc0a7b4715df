"""Keeping up with a write-only writer (daemon.tables.pace): a table is re-checked right after its run
when writers committed meanwhile and it is at its compaction trigger again (it runs at once,
without a tick); an idle table near its trigger is watched between ticks; the gauges of a
running table follow the writer. The writer is pypaimon; the result is read back by it."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support.pypaimon_oracle import read_rows
from support.stepping_clock import SteppingClock
from support.write_only_writer import Writer

from paimond.config.settings import load_settings
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.daemon.tables import pace
from paimond.daemon.tables.watch import Watcher
from paimond.maintenance import jobs as registry_module
from paimond.maintenance.jobs import ROUTINE, ROUTINE_JOBS, CompactSettings, Job, JobReport
from paimond.table.catalog import Table, open_table
from paimond.table.status.report import table_status
from paimond.table.storage.interface import open_storage

NAME = "db.t"
TRIGGER = 3
WAIT_S = 60


def _daemon(path: str) -> tuple[Daemon, CollectorRegistry]:
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": path, **{
        f"PAIMOND_JOBS_{job.upper()}_ENABLED": "false" for job in ROUTINE_JOBS if job != "compact"}},
        jobs=ROUTINE)
    registry = CollectorRegistry()
    daemon = Daemon(settings, Metrics(registry))
    daemon.keep_up = True  # as `run` sets it
    return daemon, registry


def _gauge(registry: CollectorRegistry, name: str) -> float | None:
    return registry.get_sample_value(f"paimond_table_{name}", {"table": NAME})


def _max_sorted_runs(warehouse: str) -> int:
    table = open_table(open_storage(warehouse), warehouse, NAME)
    return max(b.sorted_runs for b in table_status(table, verify_files=False).buckets)


def test_pace_rules() -> None:
    assert pace.watch_interval_s(10) == 1.0 and pace.watch_interval_s(0.5) == 0.2
    gauges = {"max_sorted_runs": 2, "compaction_trigger": 3}
    assert not pace.compaction_due(gauges) and pace.compaction_due({**gauges, "max_sorted_runs": 3})
    assert pace.may_be_due(gauges, 1) and not pace.may_be_due(gauges, 0)
    assert not pace.may_be_due({**gauges, "max_sorted_runs": 1}, 1)
    jobs = ("compact", "expire")
    assert pace.paced_jobs(jobs, True) == jobs
    assert pace.paced_jobs(jobs, False) == ("compact",), "duties wait, compaction goes"
    assert pace.paced_jobs(("expire",), False) == ()
    assert pace.paced_jobs(("compact",), False) == ("compact",)
    waits = [("a", 30.0), ("b", float("-inf")), ("c", 10.0), ("d", 20.0)]
    assert pace.duty_turns(waits, 0, 2) == {"b", "c"}, "never run, then the longest waiting"
    assert pace.duty_turns(waits, 1, 2) == {"b"}
    assert pace.duty_turns(waits, 3, 2) == set()


def test_a_table_runs_again_right_after_its_run_when_writers_brought_it_to_the_trigger(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse = str(tmp_path / "wh")
    writer = Writer(warehouse, NAME, TRIGGER)
    writer.commit()
    daemon, registry = _daemon(warehouse)
    real = registry_module.JOBS["compact"].run
    calls: list[int] = []
    second = threading.Event()
    gauges_during: list[float | None] = []

    def compact_while_writing(table: Any, settings: Any, context: Any) -> JobReport:
        calls.append(len(calls))
        report = real(table, settings, context)
        if len(calls) == 1:  # the writer goes on during the job: the table reaches its trigger
            for _ in range(TRIGGER):
                writer.commit()
            daemon.tick()  # a tick while the table runs: its gauges follow the writer
            gauges_during.append(_gauge(registry, "max_sorted_runs"))
        else:
            second.set()
        return report

    monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                        Job("compact", CompactSettings, compact_while_writing))
    futures = daemon.tick()
    assert len(futures) == 1 and futures[0].result(WAIT_S).error is None
    assert gauges_during[0] is not None and gauges_during[0] >= TRIGGER
    assert second.wait(WAIT_S), "re-checked and run again without a tick"
    Lifecycle(daemon).shutdown(WAIT_S)
    assert calls == [0, 1]
    assert _max_sorted_runs(warehouse) == 1  # the second run compacted what came meanwhile
    rows = read_rows(warehouse, NAME)
    assert sorted(rows.column("id").to_pylist()) == list(range(writer.next_id + 5))


def test_the_watch_runs_an_idle_table_at_its_trigger_between_ticks(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    writer = Writer(warehouse, NAME, TRIGGER)
    for _ in range(TRIGGER - 1):
        writer.commit()
    daemon, registry = _daemon(warehouse)
    for future in daemon.tick():
        assert future.result(WAIT_S).error is None
    state = daemon.tables[NAME]
    assert state.moved_at > float("-inf") and not state.compaction_due, "moved: watched"
    assert daemon.watch() == [], "nothing moved: nothing to do"
    writer.commit()
    futures = daemon.watch()
    assert len(futures) == 1 and futures[0].result(WAIT_S).error is None
    Lifecycle(daemon).shutdown(WAIT_S)
    assert _max_sorted_runs(warehouse) == 1
    assert len(read_rows(warehouse, NAME)) == writer.next_id + 5


def test_every_tables_compaction_draws_on_the_one_memory_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse = str(tmp_path / "wh")
    Writer(warehouse, NAME, TRIGGER).commit()
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": warehouse,
                                        "PAIMOND_LIMITS_MEMORY_BUDGET_MB": "256"}, jobs=ROUTINE)
    daemon = Daemon(settings, Metrics(CollectorRegistry()))
    budgets: list[Any] = []

    def recording(table: Any, settings: Any, context: Any) -> JobReport:
        budgets.append(context.memory_budget)
        return registry_module.JobReport(_Done())

    monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                        Job("compact", CompactSettings, recording))
    for _ in range(2):
        future = daemon.trigger(NAME)
        assert future is not None and future.result(WAIT_S).error is None
    Lifecycle(daemon).shutdown(WAIT_S)
    assert len(budgets) == 2 and budgets[0] is budgets[1]
    assert budgets[0].budget_bytes == 256 << 20


class _Done:
    def describe(self) -> str:
        return "done"


def test_an_idle_tables_run_that_changed_nothing_neither_rereads_nor_watches_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse = str(tmp_path / "wh")
    writer = Writer(warehouse, NAME, TRIGGER)
    writer.commit()
    daemon, _ = _daemon(warehouse)
    for future in daemon.tick():
        assert future.result(WAIT_S).error is None
    state = daemon.tables[NAME]
    moved_at, gauged = state.moved_at, state.gauged_snapshot_id
    reads: list[int] = []
    rechecked = threading.Event()
    real_read, real_recheck = Watcher.read, daemon._recheck

    def counting_read(self: Watcher, table: Any, now_ms: int) -> Any:
        reads.append(now_ms)
        return real_read(self, table, now_ms)

    def recheck(table_state: Any) -> None:
        real_recheck(table_state)
        rechecked.set()

    monkeypatch.setattr(Watcher, "read", counting_read)
    monkeypatch.setattr(daemon, "_recheck", recheck)
    run = daemon.trigger(NAME)
    assert run is not None and run.result(WAIT_S).error is None
    assert run.result().reports["compact"].outcome == "success"
    assert rechecked.wait(WAIT_S)
    Lifecycle(daemon).shutdown(WAIT_S)
    assert reads == [], "the gauges of the snapshot they were read at are not read again"
    assert state.gauged_snapshot_id == gauged and not state.active
    assert state.moved_at == moved_at, "not watched for a run that changed nothing"


class _CountingTables(dict[str, Any]):
    """The daemon's table states, counting the passes over them."""

    passes = 0

    def values(self) -> Any:
        type(self).passes += 1
        return super().values()


def _copies_compacted_and_expired(tmp_path: Path, tables: int,
                                  expire_interval_s: float | None = None) -> Any:
    """Settings of a daemon over ``tables`` copies of one written table, one run at a time,
    compaction and expiry its only jobs."""
    warehouse = tmp_path / "wh"
    Writer(str(warehouse), NAME, TRIGGER).commit()
    for i in range(1, tables):
        shutil.copytree(warehouse / "db.db" / "t", warehouse / "db.db" / f"t{i}")
    interval = {} if expire_interval_s is None else {
        "PAIMOND_JOBS_EXPIRE_INTERVAL_S": str(expire_interval_s)}
    return load_settings(None, env={
        "PAIMOND_WAREHOUSE": str(warehouse), "PAIMOND_LIMITS_CONCURRENCY": "1", **interval,
        **{f"PAIMOND_JOBS_{job.upper()}_ENABLED": "false" for job in ROUTINE_JOBS
           if job not in ("compact", "expire")}}, jobs=ROUTINE)


def test_a_wave_of_duties_counts_its_running_duties_without_a_pass_per_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every table due for its duties at once (a first pass): one run with duties at a time
    (``limits.concurrency`` 1), compaction alone for the others, and the running duties are
    counted as runs start and end (once a pass over every table per due table: O(N^2))."""
    tables = 6
    settings = _copies_compacted_and_expired(tmp_path, tables)
    daemon = Daemon(settings, Metrics(CollectorRegistry()))
    daemon.keep_up = True
    daemon.tables = _CountingTables()
    release = threading.Event()

    def expire(table: Any, settings: Any, context: Any) -> JobReport:
        assert release.wait(WAIT_S)  # the duty run stays running through the tick
        return JobReport(_Done())

    monkeypatch.setitem(registry_module.JOBS, "expire",  # type: ignore[arg-type]
                        Job("expire", registry_module.JOBS["expire"].settings_type, expire))
    futures = daemon.tick()
    passes = _CountingTables.passes
    release.set()
    runs = [f.result(WAIT_S) for f in futures]
    Lifecycle(daemon).shutdown(WAIT_S)
    assert len(runs) == tables and all(r.error is None for r in runs)
    with_duties = [r for r in runs if set(r.reports) != {"compact"}]
    assert len(with_duties) == 1 and "expire" in with_duties[0].reports
    assert passes < tables, f"{passes} passes over the tables in one tick"
    assert daemon._duty_runs == 0 and not any(s.duties for s in daemon.tables.values())


def test_every_table_gets_its_turn_for_duties_that_come_due_again_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Expiry due again at every tick, on every table, one run with duties at a time:
    the turn goes to the table whose duties waited longest and each run that ends hands it
    on, so at each tick every table expires once, not the first one over and over."""
    tables = 5
    settings = _copies_compacted_and_expired(tmp_path, tables, expire_interval_s=1)
    clock = SteppingClock()
    daemon = Daemon(settings, Metrics(CollectorRegistry(), clock), clock=clock)
    daemon.keep_up = True
    expired: list[str] = []

    def expire(table: Any, settings: Any, context: Any) -> JobReport:
        expired.append(table.name)
        return JobReport(_Done())

    monkeypatch.setitem(registry_module.JOBS, "expire",  # type: ignore[arg-type]
                        Job("expire", registry_module.JOBS["expire"].settings_type, expire))
    for tick in range(tables):
        clock.at(2 * tick)  # every table's expiry is due again at each tick
        runs = [f.result(WAIT_S) for f in daemon.tick()]
        assert all(r.error is None for r in runs), runs
        # the turns handed on as duty runs end: every table once (a table that ran at this
        # moment is not due again before the next tick's)
        _until_no_table_runs(daemon, lambda n=tables * (tick + 1): len(expired) >= n)
        assert sorted(expired[tick * tables:]) == sorted(daemon.tables), expired
    Lifecycle(daemon).shutdown(WAIT_S)


def _until_no_table_runs(daemon: Daemon, done: Callable[[], bool]) -> None:
    """Until ``done`` holds and no table runs (nothing left to hand a turn on to)."""
    deadline = time.monotonic() + WAIT_S
    while not done() or any(state.running for state in daemon.tables.values()):
        assert time.monotonic() < deadline, "runs still going"
        time.sleep(0.01)  # polling for the pool's callbacks: no event marks the last one


def test_a_duty_run_that_ends_hands_its_turn_to_the_next_waiting_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One run with duties at a time (``limits.concurrency`` 1) and every table's expiry due
    at the first tick: as each duty run ends the next waiting table gets the turn, so every
    table expires without waiting for further ticks (a tick gives one turn)."""
    tables = 5
    settings = _copies_compacted_and_expired(tmp_path, tables)
    daemon = Daemon(settings, Metrics(CollectorRegistry()))
    daemon.keep_up = True
    expired: list[str] = []
    all_expired = threading.Event()

    def expire(table: Any, settings: Any, context: Any) -> JobReport:
        expired.append(table.name)
        if len(expired) == tables:
            all_expired.set()
        return JobReport(_Done())

    monkeypatch.setitem(registry_module.JOBS, "expire",  # type: ignore[arg-type]
                        Job("expire", registry_module.JOBS["expire"].settings_type, expire))
    runs = [f.result(WAIT_S) for f in daemon.tick()]
    assert all(r.error is None for r in runs), runs
    assert all_expired.wait(WAIT_S), expired  # one tick, then the turns passed on
    Lifecycle(daemon).shutdown(WAIT_S)
    assert sorted(expired) == sorted(daemon.tables), expired


@pytest.mark.parametrize("idle_check_interval_s", [60.0, 0.0])
def test_a_table_nothing_moves_is_checked_once_per_idle_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, idle_check_interval_s: float) -> None:
    """Ticks every 10 s over two tables that went quiet after their first runs: the one no
    writer touches is read once a minute (``daemon.idle_check_interval_s``; 0: every tick);
    a commit to the other is seen within that minute, and from then on it is read at every
    tick again."""
    warehouse = tmp_path / "wh"
    Writer(str(warehouse), NAME, TRIGGER).commit()
    writer = Writer(str(warehouse), "db.written", TRIGGER)
    writer.commit()
    settings = load_settings(None, env={
        "PAIMOND_WAREHOUSE": str(warehouse),
        "PAIMOND_DAEMON_IDLE_CHECK_INTERVAL_S": str(idle_check_interval_s),
        **{f"PAIMOND_JOBS_{job.upper()}_ENABLED": "false" for job in ROUTINE_JOBS
           if job != "compact"}}, jobs=ROUTINE)
    clock = SteppingClock()
    daemon = Daemon(settings, Metrics(CollectorRegistry(), clock), clock=clock)
    reads: list[tuple[str, float]] = []
    real = Table.watched_latest_id

    def counting(self: Table) -> int | None:
        reads.append((self.name, clock.wall_ms() / 1000 - clock.start_ms / 1000))
        return real(self)

    monkeypatch.setattr(Table, "watched_latest_id", counting)
    for second in range(0, 400, 10):
        clock.at(second)
        if second == 200:
            writer.commit()
        for future in daemon.tick():
            assert future.result(WAIT_S).error is None
    Lifecycle(daemon).shutdown(WAIT_S)
    quiet = [at for name, at in reads if name == NAME and at >= 100]
    written = [at for name, at in reads if name == "db.written" and at >= 100]
    if not idle_check_interval_s:
        assert quiet == written == list(range(100, 400, 10))
        return
    assert len(quiet) in (5, 6), quiet  # 100..390: once a minute, not 30 times
    assert all(b - a >= 50 for a, b in zip(quiet, quiet[1:], strict=False)), quiet
    seen = min(at for at in written if at >= 200)
    assert seen < 260, written  # the commit at 200 s: seen within the minute
    assert [at for at in written if at >= seen][:6] == list(range(int(seen), int(seen) + 60, 10))
    assert daemon.tables["db.written"].last_snapshot_id == daemon.tables[
        "db.written"].table.snapshots.latest_id()
