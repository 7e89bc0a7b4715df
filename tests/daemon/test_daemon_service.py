"""The daemon's service under concurrency and through its lifecycle: discovery racing runs and
triggers, stop within the grace period and a forced second stop, one log line and one metric
per failed job by error kind, conflicts and re-plans counted apart. Jobs are stand-ins."""

from __future__ import annotations

import dataclasses
import itertools
import shutil
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs
from support.pypaimon_tables import build_pk_aggregation, build_pk_deduplicate
from support.stepping_clock import SteppingClock

from paimond.config.settings import load_settings
from paimond.daemon import discovery
from paimond.daemon import service as daemon_service
from paimond.daemon.http.control import Control
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import TableRun
from paimond.daemon.service import Daemon
from paimond.errors import CommitConflictError, CorruptFileError, JobCancelledError
from paimond.maintenance import jobs as registry_module
from paimond.maintenance.jobs import ROUTINE, ROUTINE_JOBS, CompactSettings, Job, JobReport
from paimond.table.branches import create_branch, delete_branch
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

WAIT_S = 60


class _Done:
    def describe(self) -> str:
        return "done"


def _stand_in(monkeypatch: pytest.MonkeyPatch, run: Any) -> None:
    """The registry's compaction replaced by ``run(table, settings, context)``."""
    monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                        Job("compact", CompactSettings, run))


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    warehouse = tmp_path_factory.mktemp("daemon_service") / "wh"
    specs = [build_pk_deduplicate(str(warehouse)), build_pk_aggregation(str(warehouse))]
    return warehouse, sorted(s.name for s in specs)


@pytest.fixture
def warehouse(pristine: tuple[Path, list[str]], tmp_path: Path) -> tuple[str, list[str]]:
    shutil.copytree(pristine[0], tmp_path / "wh")
    return str(tmp_path / "wh"), pristine[1]


def _daemon(path: str, **env: str) -> tuple[Daemon, CollectorRegistry]:
    settings = load_settings(None, env={
        "PAIMOND_WAREHOUSE": path, "PAIMOND_JOBS_EXPIRE_ENABLED": "false",
        "PAIMOND_JOBS_MERGE_MANIFESTS_ENABLED": "false", "PAIMOND_DAEMON_BACKOFF_BASE_S": "0",
        "PAIMOND_HTTP_PORT": "0", **env}, jobs=ROUTINE)
    registry = CollectorRegistry()
    return Daemon(settings, Metrics(registry)), registry


def test_discovery_races_runs_and_triggers(warehouse: tuple[str, list[str]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path, names = warehouse
    steady, flaky = names
    _stand_in(monkeypatch, lambda table, settings, context: JobReport(_Done()))
    real_find = daemon_service.find_tables
    flips = itertools.count()

    def flapping(*args: Any, **kwargs: Any) -> Any:  # the flaky table vanishes every other time
        found = real_find(*args, **kwargs)
        if next(flips) % 2:
            del found[flaky]
        return found

    monkeypatch.setattr(daemon_service, "find_tables", flapping)
    daemon, _ = _daemon(path, PAIMOND_LIMITS_CONCURRENCY="4",
                        PAIMOND_DAEMON_DISCOVERY_INTERVAL_S="0.1")
    daemon.discover()
    errors: list[BaseException] = []
    runs: list[Future[TableRun]] = []
    answers: dict[str, list[Future[TableRun] | None]] = {steady: [], flaky: []}
    lock = threading.Lock()

    def hammer(body: Any, times: int) -> None:
        try:
            for _ in range(times):
                body()
        except BaseException as error:
            errors.append(error)

    def tick() -> None:
        futures = daemon.tick()
        with lock:
            runs.extend(futures)

    def trigger(name: str) -> None:
        future = daemon.trigger(name)
        with lock:
            answers[name].append(future)

    threads = ([threading.Thread(target=hammer, args=(daemon.discover, 150)) for _ in range(3)]
               + [threading.Thread(target=hammer, args=(tick, 40)) for _ in range(2)]
               + [threading.Thread(target=hammer, args=(lambda n=n: trigger(n), 40))
                  for n in (steady, flaky) for _ in range(2)])
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    assert not any(t.is_alive() for t in threads) and errors == []
    assert len(answers[steady]) == 80 and None not in answers[steady], "a known table: answered"
    for future in [*runs, *answers[steady], *(f for f in answers[flaky] if f is not None)]:
        run = future.result(WAIT_S)
        assert run.error is None and run.reports["compact"].outcome == "success", run
    assert {r.result().table for r in answers[steady]} == {steady}
    status = Control(daemon).status()
    assert daemon.running_jobs == 0 and not any(s["running"] for s in status.values())  # type: ignore[index]
    assert Lifecycle(daemon).shutdown(5)


def _blocking_compaction(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event,
                                                                    threading.Event, list[bool]]:
    started, release, cancelled = threading.Event(), threading.Event(), []

    def blocking(table: Any, settings: Any, context: Any) -> JobReport:
        started.set()
        release.wait(WAIT_S)
        try:  # a job learns at its progress calls that it must abandon its work; this
            context.progress(1, 1, None)  # stand-in notes it and returns all the same
        except JobCancelledError:
            cancelled.append(True)
        else:
            cancelled.append(False)
        return JobReport(_Done())

    _stand_in(monkeypatch, blocking)
    return started, release, cancelled


def _run_in_thread(lifecycle: Lifecycle) -> tuple[threading.Thread, list[bool]]:
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(lifecycle.run()))
    thread.start()
    return thread, result


def test_a_known_tables_branches_are_listed_every_five_minutes(
        warehouse: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, names = warehouse
    clock = SteppingClock()
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": path, "PAIMOND_HTTP_PORT": "0"},
                             jobs=ROUTINE)
    daemon = Daemon(settings, Metrics(CollectorRegistry()), clock=clock)
    listed: list[str] = []
    real_list = discovery.list_tables

    def counting(*args: Any, **kwargs: Any) -> Any:
        listed.append("branches" if kwargs.get("known_branches", True) else "tables")
        return real_list(*args, **kwargs)

    monkeypatch.setattr(discovery, "list_tables", counting)
    daemon.discover()
    table = open_table(open_storage(path), path, names[0])
    create_branch(table, "b1")
    branch = f"{names[0]}$branch_b1"
    clock.at(60)
    daemon.discover()
    assert branch not in daemon.tables and set(daemon.tables) == set(names)
    clock.at(300)
    daemon.discover()
    assert set(daemon.tables) == {*names, branch}
    create_branch(table, "b2")
    clock.at(360)
    daemon.discover()
    assert set(daemon.tables) == {*names, branch}, "a known branch stays between listings"
    delete_branch(table, "b1")
    clock.at(420)
    daemon.discover()
    assert set(daemon.tables) == set(names), "a deleted one goes at once"
    clock.at(600)
    daemon.discover()
    assert set(daemon.tables) == {*names, f"{names[0]}$branch_b2"}
    assert listed == ["branches", "tables", "branches", "tables", "tables", "branches"]


def test_stop_lets_a_running_job_finish_within_the_grace_period(
        warehouse: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    started, release, cancelled = _blocking_compaction(monkeypatch)
    daemon, registry = _daemon(warehouse[0], PAIMOND_LIMITS_CONCURRENCY="1",
                               PAIMOND_SHUTDOWN_GRACE_S="60")
    lifecycle = Lifecycle(daemon)
    thread, result = _run_in_thread(lifecycle)
    assert started.wait(WAIT_S)
    lifecycle.stop()
    assert lifecycle.stopping.wait(WAIT_S)
    assert thread.is_alive(), "shutdown waits for the running job"
    release.set()
    thread.join(WAIT_S)
    assert result == [True] and not lifecycle.forced
    assert cancelled == [False], "within the grace period a job is not cancelled"
    assert sum(registry.get_sample_value("paimond_jobs_finished_total", {
        "job": "compact", "table": name, "outcome": "success"}) or 0
               for name in warehouse[1]) == 1, "the one job that ran; the queued one never did"


def test_a_second_stop_forces_the_exit(warehouse: tuple[str, list[str]],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    started, release, cancelled = _blocking_compaction(monkeypatch)
    daemon, _ = _daemon(warehouse[0], PAIMOND_LIMITS_CONCURRENCY="1",
                        PAIMOND_SHUTDOWN_GRACE_S="3600")
    lifecycle = Lifecycle(daemon)
    thread, result = _run_in_thread(lifecycle)
    assert started.wait(WAIT_S)
    lifecycle.stop()
    assert lifecycle.stopping.wait(WAIT_S)
    lifecycle.stop()
    thread.join(WAIT_S)
    assert not thread.is_alive() and result == [False] and lifecycle.forced
    release.set()  # the abandoned job sees the cancellation at its next check
    daemon.runs.join()
    assert cancelled == [True]


def test_the_grace_period_ends_by_cancelling_what_still_runs(
        warehouse: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    started, release, cancelled = _blocking_compaction(monkeypatch)
    daemon, _ = _daemon(warehouse[0], PAIMOND_LIMITS_CONCURRENCY="1")
    daemon.discover()
    futures = daemon.tick()
    assert started.wait(WAIT_S)
    lifecycle = Lifecycle(daemon)
    assert lifecycle.shutdown(0.05) is False and not lifecycle.forced
    release.set()
    runs = [f.result(WAIT_S) for f in futures]
    assert cancelled == [True]
    # The running job ends as the stand-in returns; the queued one was cancelled, unrun.
    assert sorted(r.reports["compact"].outcome for r in runs) == ["skipped", "success"]
    late = daemon.trigger(warehouse[1][0])
    assert late is not None and late.result(WAIT_S).reports["compact"].outcome == "skipped"
    assert daemon.tick() == []


@pytest.mark.parametrize("error, kind", [(CorruptFileError("data/f.orc", "bad magic"), "data"),
                                         (ValueError("a bug"), "internal")])
def test_a_failed_job_logs_once_and_counts_by_error_kind(
        warehouse: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch, error: Exception,
        kind: str) -> None:
    path, names = warehouse

    def failing(table: Any, settings: Any, context: Any) -> JobReport:
        raise error

    _stand_in(monkeypatch, failing)
    daemon, registry = _daemon(path)
    with capture_logs() as logs:
        runs = [f.result(WAIT_S) for f in daemon.tick()]
    assert sorted(r.table for r in runs) == names and all(r.error_kind == kind for r in runs)
    failed = [e for e in logs if e["event"] == "job_failed"]
    assert sorted(e["table"] for e in failed) == names
    assert all(e["job"] == "compact" and e["error_kind"] == kind and e["log_level"] == "error"
               and type(error).__name__ in e["error"] for e in failed)
    assert not [e for e in logs if e["event"] == "table_run_failed"], "logged once, by its job"
    for name in names:
        assert registry.get_sample_value("paimond_job_failures_total", {
            "job": "compact", "table": name, "error_kind": kind}) == 1
        assert registry.get_sample_value("paimond_jobs_finished_total", {
            "job": "compact", "table": name, "outcome": "failure"}) == 1
    assert Control(daemon).status()[names[0]]["failures"] == 1  # type: ignore[index]
    Lifecycle(daemon).shutdown(5)


def test_conflicts_and_re_plans_are_counted_apart(warehouse: tuple[str, list[str]],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path, (first, second) = warehouse
    def compaction(table: Any, settings: Any, context: Any) -> JobReport:
        if table.name == second:  # gave up after a conflict: no re-plan
            raise CommitConflictError(table.name, "RequireFilesLive", "inputs live", "inputs gone")
        return JobReport(_Done(), replans=2)  # 3 attempts: 2 conflicts, 2 re-plans

    _stand_in(monkeypatch, compaction)
    daemon, registry = _daemon(path)
    with capture_logs() as logs:
        assert len([f.result(WAIT_S) for f in daemon.tick()]) == 2

    def value(metric: str, table: str) -> float | None:
        return registry.get_sample_value(metric, {"table": table})

    assert (value("paimond_commit_conflicts_total", first),
            value("paimond_commit_retries_total", first)) == (2, 2)
    assert (value("paimond_commit_conflicts_total", second),
            value("paimond_commit_retries_total", second)) == (1, None)
    conflicted = {e["table"]: (e["conflicts"], e["retries"]) for e in logs
                  if e["event"] == "commit_conflicted"}
    assert conflicted == {first: (2, 2), second: (1, 0)}
    Lifecycle(daemon).shutdown(5)


def test_jobs_get_the_injected_clock_and_the_tables_picker_states(
        warehouse: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    from paimond.clock import Clock

    seen: list[tuple[Any, Any]] = []

    def recording(table: Any, settings: Any, context: Any) -> JobReport:
        context.picker_states[table.name] = len(seen)
        seen.append((context.clock, id(context.picker_states)))
        return JobReport(_Done())

    _stand_in(monkeypatch, recording)
    path, names = warehouse
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": path, **{
        f"PAIMOND_JOBS_{job.upper()}_ENABLED": "false" for job in ROUTINE_JOBS if job != "compact"}},
        jobs=ROUTINE)
    clock = Clock(fixed_ms=1_700_000_000_000)
    daemon = Daemon(settings, Metrics(CollectorRegistry(), clock), clock=clock)
    for _ in range(2):
        for name in names:
            future = daemon.trigger(name)
            assert future is not None and future.result(WAIT_S).error is None
    assert seen and all(given is clock for given, _ in seen), "the daemon's own clock"
    assert Control(daemon).status()[names[0]]["last_run"] == {"compact": 1_700_000_000.0}  # type: ignore[index]
    kept = {name: daemon.tables[name].picker_states for name in names}
    assert kept[names[0]] is not kept[names[1]]
    assert [ident for _, ident in seen] == [id(kept[n]) for n in names] * 2, "kept across runs"
    Lifecycle(daemon).shutdown(5)


def test_a_job_still_running_after_the_grace_period_publishes_nothing(
        warehouse: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """A job committed after `daemon_stopped`. Once the grace period ended, a real
    compaction that reaches its commit (no progress check on the way) is refused there: no
    snapshot appears, and the run says it was abandoned."""
    path, names = warehouse
    real = registry_module.JOBS["compact"]
    started, release = threading.Event(), threading.Event()

    def late(table: Any, settings: Any, context: Any) -> JobReport:
        started.set()
        release.wait(WAIT_S)
        return real.run(table, settings, dataclasses.replace(context, progress=None))

    _stand_in(monkeypatch, late)
    daemon, _ = _daemon(path, PAIMOND_LIMITS_CONCURRENCY="1")
    daemon.discover()
    before = {n: daemon.tables[n].table.snapshots.latest_id() for n in names}
    futures = daemon.tick()
    assert started.wait(WAIT_S)
    assert Lifecycle(daemon).shutdown(0.05) is False
    release.set()
    runs = [f.result(WAIT_S) for f in futures]
    assert all(r.reports["compact"].outcome == "skipped" for r in runs), runs
    assert any("abandoned: the daemon is stopping" in r.reports["compact"].detail for r in runs)
    assert {n: daemon.tables[n].table.snapshots.latest_id() for n in names} == before
