"""Compaction never waits behind its own table's slower jobs (daemon.tables.pace.compact_again): a run
that compacts compacts again between an expiry's bounded rounds once a write-only writer
committed enough meanwhile, in the same stream under the table's lease. The writer is
pypaimon; the table is read back by it. Deterministic: the writer commits inside the fake
expiry, between its rounds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support.pypaimon_oracle import read_rows
from support.write_only_writer import Writer

from paimond.config.settings import load_settings
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import TableRun, TableWork
from paimond.daemon.service import Daemon
from paimond.daemon.tables import pace
from paimond.maintenance import jobs as registry_module
from paimond.maintenance.jobs import ROUTINE, CompactSettings, ExpireOverrides, Job, JobReport
from paimond.table.catalog import Table, open_table
from paimond.table.status.report import table_status
from paimond.table.storage.interface import open_storage

NAME = "db.t"
TRIGGER = 3
ROUNDS = 3


class _Said:
    def describe(self) -> str:
        return "expired in rounds"


def _sorted_runs(table: Table) -> int:
    return max(b.sorted_runs for b in table_status(table, verify_files=False).buckets)


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int | None = None
         ) -> tuple[TableRun, list[int], list[int], Writer, Table]:
    """A run of (compact, expire) whose expiry has ROUNDS rounds, the writer bringing the
    table to its trigger during each. Returns the run, the latest snapshot id at each
    compaction's start, the sorted runs at each round's end, the writer and the table."""
    warehouse = str(tmp_path / "wh")
    writer = Writer(warehouse, NAME, TRIGGER)
    writer.commit()
    table = open_table(open_storage(warehouse), warehouse, NAME)
    daemon = Daemon(load_settings(None, env={"PAIMOND_WAREHOUSE": warehouse}, jobs=ROUTINE),
                    Metrics(CollectorRegistry()))
    real = registry_module.JOBS["compact"].run
    compactions: list[int] = []
    runs_after_round: list[int] = []

    def compact(table: Any, settings: Any, context: Any) -> JobReport:
        compactions.append(table.snapshots.latest_id())
        if len(compactions) == fail_at:
            raise RuntimeError("compaction failed")
        return real(table, settings, context)

    def expire(table: Any, settings: Any, context: Any) -> JobReport:
        for done in range(1, ROUNDS + 1):  # a round, while the writer goes on
            for _ in range(TRIGGER):
                writer.commit()
            if done < ROUNDS:  # expire_in_rounds reports progress between rounds
                context.progress(done, ROUNDS, "expire rounds")
            runs_after_round.append(_sorted_runs(table))
        return JobReport(_Said())

    monkeypatch.setitem(registry_module.JOBS, "compact",  # type: ignore[arg-type]
                        Job("compact", CompactSettings, compact))
    monkeypatch.setitem(registry_module.JOBS, "expire",  # type: ignore[arg-type]
                        Job("expire", ExpireOverrides, expire))
    run = daemon.runner.run_table(TableWork(table, 0, ("compact", "expire"), None, {}))
    Lifecycle(daemon).shutdown(0)
    return run, compactions, runs_after_round, writer, table


def test_compact_again_rule() -> None:
    assert not pace.compact_again(None, 9), "no compaction in the run (or it failed)"
    assert not pace.compact_again(4, None)
    assert not pace.compact_again(4, 4 + pace.COMPACT_AGAIN_AFTER - 1)
    assert pace.compact_again(4, 4 + pace.COMPACT_AGAIN_AFTER)


def test_a_run_compacts_again_between_its_expirys_rounds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, compactions, runs_after_round, writer, table = _run(tmp_path, monkeypatch)
    assert run.error is None and run.reports["expire"].outcome == "success"
    assert run.reports["compact"].outcome == "success"
    # the run's first compaction, then one after each of the first rounds: the writer's
    # TRIGGER snapshots per round brought the bucket to its trigger each time
    assert len(compactions) == ROUNDS
    assert runs_after_round[:-1] == [1] * (ROUNDS - 1), "compacted between rounds"
    assert runs_after_round[-1] == 1 + TRIGGER  # the last round's: the next run's work
    # the last compaction's commit is the latest the run accounts for
    assert run.compacted_snapshot_id == compactions[-1] + 1
    assert run.compacted_snapshot_id == table.snapshots.latest_id() - TRIGGER
    assert _sorted_runs(table) == 1 + TRIGGER
    rows = read_rows(str(tmp_path / "wh"), NAME)
    assert sorted(rows.column("id").to_pylist()) == list(range(writer.next_id + 5))


def test_a_failed_compaction_between_rounds_leaves_the_expiry_to_finish(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run, compactions, runs_after_round, writer, table = _run(tmp_path, monkeypatch, fail_at=2)
    assert run.error is None and run.reports["expire"].outcome == "success"
    assert len(compactions) == 2, "not tried again in the same run"
    assert runs_after_round == [1 + TRIGGER * k for k in range(1, ROUNDS + 1)]
    assert run.compacted_snapshot_id == compactions[0]  # the first one: nothing to compact
    rows = read_rows(str(tmp_path / "wh"), NAME)
    assert sorted(rows.column("id").to_pylist()) == list(range(writer.next_id + 5))
