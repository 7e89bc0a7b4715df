"""The daemon and a job that refuses a table (pypaimon-written aggregation table with
``sequence.snapshot-ordering``, which paimond does not implement): compaction is skipped with
the reason (metric outcome ``skipped``, one log line), not failed; expire and merge-manifests still run; no
backoff, no quarantine; and compaction is not tried again until the table's options change."""

from __future__ import annotations

import dataclasses
import datetime
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from pypaimon.schema.schema_change import SchemaChange
from structlog.testing import capture_logs
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import TableSpec, build_pk_listagg, catalog_for

from paimond.clock import Clock
from paimond.config.settings import load_settings
from paimond.daemon.http.control import Control
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import TableRun
from paimond.daemon.service import Daemon
from paimond.maintenance.jobs import ROUTINE

NAME = "db.pk_listagg"
START_MS = 1_700_000_000_000
WAIT_S = 60


@dataclasses.dataclass(frozen=True, slots=True)
class SteppingClock(Clock):
    """Wall time the test moves (``now_ms[0]``)."""

    now_ms: list[int] = dataclasses.field(default_factory=lambda: [START_MS])

    def wall_ms(self) -> int:
        return self.now_ms[0]

    def local_now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.now_ms[0] / 1000)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TableSpec]:
    warehouse = tmp_path_factory.mktemp("daemon_refusals") / "wh"
    return warehouse, build_pk_listagg(str(warehouse))


@pytest.fixture
def warehouse(pristine: tuple[Path, TableSpec], tmp_path: Path) -> tuple[str, TableSpec]:
    shutil.copytree(pristine[0], tmp_path / "wh")
    return str(tmp_path / "wh"), pristine[1]


def _daemon(path: str, clock: Clock) -> tuple[Daemon, CollectorRegistry]:
    settings = load_settings(None, env={  # every tick checks the tables, however still
        "PAIMOND_WAREHOUSE": path, "PAIMOND_DAEMON_IDLE_CHECK_INTERVAL_S": "0",
        "PAIMOND_DAEMON_BACKOFF_BASE_S": "60",
        "PAIMOND_DAEMON_QUARANTINE_AFTER": "1", "PAIMOND_LIMITS_CONCURRENCY": "1",
        "PAIMOND_JOBS_EXPIRE_RETAIN_MIN": "1", "PAIMOND_JOBS_EXPIRE_RETAIN_MAX": "1",
        "PAIMOND_JOBS_EXPIRE_OLDER_THAN": "1 ms",
        # forced as the CLI merges (the daemon's default waits for the table's thresholds):
        # this small table then moves by a COMPACT snapshot of the daemon's own
        "PAIMOND_JOBS_MERGE_MANIFESTS_FORCED": "true"}, jobs=ROUTINE)
    registry = CollectorRegistry()
    return Daemon(settings, Metrics(registry, clock), clock=clock), registry


def _tick(daemon: Daemon) -> dict[str, TableRun]:
    return {run.table: run for run in (f.result(WAIT_S) for f in daemon.tick())}


def _count(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, {"table": NAME, **labels}) or 0.0


def _set_option(path: str, key: str, value: str) -> None:
    catalog_for(path).alter_table(NAME, [SchemaChange.set_option(key, value)])


def _set_immutable_option(path: str, key: str, value: str) -> None:
    """A next schema file differing in one option Paimon's ALTER TABLE refuses to change."""
    schema_dir = Path(path) / "db.db" / "pk_listagg" / "schema"
    latest = max(schema_dir.glob("schema-*"), key=lambda p: int(p.name.split("-")[1]))
    schema = json.loads(latest.read_text())
    schema |= {"id": schema["id"] + 1, "options": schema["options"] | {key: value}}
    (schema_dir / f"schema-{schema['id']}").write_text(json.dumps(schema))


def test_a_refused_compaction_is_skipped_and_not_retried_until_the_options_change(
        warehouse: tuple[str, TableSpec]) -> None:
    path, spec = warehouse
    clock = SteppingClock()
    daemon, registry = _daemon(path, clock)
    with capture_logs() as logs:
        runs = _tick(daemon)
    run = runs[NAME]
    assert run.error is None
    compact = run.reports["compact"]
    assert compact.outcome == "skipped" and compact.refused is not None
    assert "refused: sequence.snapshot-ordering=true" in compact.detail
    outcomes = {job: r.outcome for job, r in run.reports.items()}
    assert outcomes["expire"] == outcomes["merge_manifests"] == "success"
    assert [job for job, outcome in outcomes.items() if outcome != "success"] == ["compact"]
    skipped = [e for e in logs if e["event"] == "job_skipped"]
    assert len(skipped) == 1 and skipped[0]["job"] == "compact"
    assert "snapshot-ordering" in skipped[0]["reason"]
    assert not [e for e in logs if e["log_level"] in ("error", "warning")], "no failure, no backoff"
    state = daemon.tables[NAME]
    assert (state.failures, state.quarantined, state.next_attempt_at) == (0, False, 0.0)
    assert _count(registry, "paimond_jobs_finished_total", job="compact", outcome="skipped") == 1
    assert _count(registry, "paimond_jobs_finished_total", job="expire", outcome="success") == 1
    assert _count(registry, "paimond_jobs_finished_total", job="merge_manifests",
                  outcome="success") == 1
    assert _count(registry, "paimond_job_failures_total", job="compact",
                  error_kind="unsupported") == 0
    reported: Any = Control(daemon).status()[NAME]
    assert reported["quarantined"] is False and reported["failures"] == 0
    table = state.table
    assert table.snapshots.latest_id() == 4, "merge-manifests committed"
    assert table.snapshots.earliest_id() == 3, "expire (before the merge) removed 1..2"
    assert read_rows(path, NAME).equals(spec.compacted_rows)

    # later ticks, the table moved (merge-manifests' snapshot) and every interval passed:
    # everything but the refused compaction runs again
    for step in range(3):
        clock.now_ms[0] += 3_600_000
        again = _tick(daemon)[NAME]
        assert "compact" not in again.reports, step
        assert again.reports["expire"].outcome == "success"
    assert _count(registry, "paimond_jobs_started_total", job="compact") == 1

    # an option changes (a new schema): compaction is evaluated again, and refuses again
    _set_option(path, "snapshot.num-retained.min", "1")
    clock.now_ms[0] += 1000
    changed = _tick(daemon)[NAME]
    assert changed.reports["compact"].outcome == "skipped"
    assert changed.reports["compact"].refused != compact.refused, "the new fingerprint"
    clock.now_ms[0] += 3_600_000
    assert "compact" not in _tick(daemon)[NAME].reports
    assert _count(registry, "paimond_jobs_finished_total", job="compact", outcome="skipped") == 2

    # an option change that lifts the refusal: compaction runs and merges as Paimon would
    _set_immutable_option(path, "sequence.snapshot-ordering", "false")
    clock.now_ms[0] += 1000
    lifted = _tick(daemon)[NAME]
    assert lifted.reports["compact"].outcome == "success", lifted.reports["compact"].detail
    assert NAME not in {n for n, s in daemon.tables.items() if s.refused}
    assert read_rows(path, NAME).equals(spec.compacted_rows), "listagg and sum as modelled"
    Lifecycle(daemon).shutdown(5)


def test_a_refused_job_is_due_again_only_under_another_fingerprint() -> None:
    """evaluate.decide alone: the refused compaction of an append table, whose latest snapshot
    never matches a compaction of ours, is not due at any tick while the fingerprint holds."""
    from paimond.daemon.tables import evaluate

    schedules = {"compact": evaluate.Schedule(True, 60), "expire": evaluate.Schedule(True, 300)}
    standing = evaluate.Standing(last_snapshot_id=7, compacted_snapshot_id=None,
                                 last_run={"compact": 0.0, "expire": 0.0},
                                 refused={"compact": "3:abc"})
    for now in (1.0, 61.0, 10_000.0):
        assert evaluate.decide(standing, 8, now, schedules, "3:abc").jobs == (
            () if now < 300 else ("expire",))
    assert evaluate.decide(standing, 8, 1.0, schedules, "4:abc").jobs == ("compact",)
    assert evaluate.decide(standing, 8, 1.0, schedules, None).jobs == ("compact",)
