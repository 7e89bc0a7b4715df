"""The expire job keeps up. A pypaimon table of many snapshots, a small
snapshot.expire.limit and an injected clock: one run of the registered ``expire`` job ends
within retention (a Python model of Java's rule), and the table equals what repeated single
expiries give (Java expires after every commit, each time at most the limit). The cap on
rounds, the progress callback between rounds and dry runs are checked too."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for
from support.table_history import tree

from paimond.clock import Clock
from paimond.maintenance.expire import rounds as expire_rounds
from paimond.maintenance.expire.rounds import ExpireRounds
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import open_storage

NAME = "db.t"
COMMITS = 40
RETAIN_MIN = 5
LIMIT = 4
OPTIONS = {"bucket": "1", "snapshot.num-retained.min": str(RETAIN_MIN),
           "snapshot.num-retained.max": "1000", "snapshot.time-retained": "1 h",
           "snapshot.expire.limit": str(LIMIT),
           # pypaimon must not expire on commit: the run under test does all of it
           "write-only": "true"}
FAR_FUTURE = Clock(fixed_ms=4_102_444_800_000)  # every snapshot is older than 1 h


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pa.Table]:
    """A primary-key table of COMMITS snapshots, each upserting a few keys; its rows."""
    warehouse = tmp_path_factory.mktemp("rounds") / "wh"
    catalog = catalog_for(str(warehouse))
    schema = pa.schema([pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])
    catalog.create_database("db", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(schema, primary_keys=["k"],
                                                           options=OPTIONS), False)
    table = catalog.get_table(NAME)
    model: dict[int, str] = {}
    for commit_no in range(COMMITS):
        keys = [(commit_no * 3 + i) % 17 for i in range(3)]
        rows = [{"k": k, "v": f"c{commit_no}"} for k in keys]
        model.update((k, f"c{commit_no}") for k in keys)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
    expected = pa.Table.from_pylist([{"k": k, "v": v} for k, v in sorted(model.items())],
                                    schema=schema)
    return warehouse, expected


def _copy(built: tuple[Path, pa.Table], tmp_path: Path, name: str) -> tuple[str, Table]:
    target = tmp_path / name
    shutil.copytree(built[0], target)
    storage = open_storage(str(target))
    return str(target), open_table(storage, storage.root, NAME)


def _rows(warehouse: str) -> pa.Table:
    return read_rows(warehouse, NAME).sort_by("k").select(["k", "v"])


def _model_earliest(latest: int) -> int:
    """Java's rule with everything older than time-retained and no consumers or tags:
    expiry stops at retain-min, so the earliest kept is latest - retain_min + 1."""
    return latest - RETAIN_MIN + 1


def _run(table: Table, **values: Any) -> ExpireRounds:
    job = JOBS["expire"]
    report = job.run(table, job.settings(**values), JobContext(FAR_FUTURE))
    assert isinstance(report.result, ExpireRounds)
    return report.result


def test_one_run_ends_within_retention_as_repeated_expiries(
        built: tuple[Path, pa.Table], tmp_path: Path) -> None:
    path, table = _copy(built, tmp_path, "rounds")
    assert (table.snapshots.earliest_id(), table.snapshots.latest_id()) == (1, COMMITS)
    result = _run(table)
    latest = table.snapshots.latest_id()
    assert latest == COMMITS
    assert table.snapshots.earliest_id() == _model_earliest(COMMITS) == 36
    expired = _model_earliest(COMMITS) - 1
    assert result.expired_snapshots == expired
    assert len(result.rounds) == -(-expired // LIMIT)  # ceil: LIMIT per round, the last less
    assert [r.plan.bound for r in result.rounds] == (
        ["expire-limit"] * (len(result.rounds) - 1) + ["retain-min"])
    assert not result.capped
    # the first line (what the daemon's event and log line carry) tells every round
    assert result.describe().splitlines()[0].startswith(
        f"db.t: expired snapshots 1..{expired} ({expired}) in {len(result.rounds)} rounds")
    assert _rows(path).equals(built[1])

    # the reference: single bounded expiries, one after the other, until nothing expires
    ref_path, ref = _copy(built, tmp_path, "repeated")
    settings = ExpireSettings.of(ref.options())
    assert settings.max_deletes == LIMIT
    runs = 0
    while ExpireJob(ref, clock=FAR_FUTURE, settings=settings).run().plan.expires:
        runs += 1
    assert runs == len(result.rounds)
    assert tree(str(Path(path) / "db.db" / "t")) == tree(str(Path(ref_path) / "db.db" / "t"))

    again = _run(table)  # within retention: nothing more
    assert len(again.rounds) == 1 and not again.last.plan.expires


def test_rounds_are_capped_and_progress_runs_between_rounds(
        built: tuple[Path, pa.Table], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, table = _copy(built, tmp_path, "capped")
    monkeypatch.setattr(expire_rounds, "MAX_ROUNDS", 3)
    calls: list[tuple[int, int]] = []
    job = JOBS["expire"]
    report = job.run(table, job.settings(), JobContext(
        FAR_FUTURE, progress=lambda done, total, _label: calls.append((done, total))))
    result = report.result
    assert isinstance(result, ExpireRounds)
    assert len(result.rounds) == 3 and result.capped
    assert calls == [(1, 3), (2, 3)]
    assert table.snapshots.earliest_id() == 1 + 3 * LIMIT
    assert "stopped after 3 rounds" in result.describe()
    assert _rows(path).equals(built[1])


def test_a_raising_progress_abandons_after_a_whole_round(
        built: tuple[Path, pa.Table], tmp_path: Path) -> None:
    path, table = _copy(built, tmp_path, "abandoned")

    class Stop(Exception):
        pass

    def stop(*_: object) -> None:
        raise Stop

    job = JOBS["expire"]
    with pytest.raises(Stop):
        job.run(table, job.settings(), JobContext(FAR_FUTURE, progress=stop))
    assert table.snapshots.earliest_id() == 1 + LIMIT  # the first round, complete
    assert _rows(path).equals(built[1])


def test_dry_run_and_a_limit_that_does_not_cut_take_one_round(
        built: tuple[Path, pa.Table], tmp_path: Path) -> None:
    path, table = _copy(built, tmp_path, "dry")
    before = tree(path)
    dry = _run(table, dry_run=True)
    assert len(dry.rounds) == 1 and dry.last.plan.bound == "expire-limit"
    assert tree(path) == before
    wide = _run(table, max_deletes=1000)
    assert len(wide.rounds) == 1 and wide.last.plan.bound == "retain-min"
    assert table.snapshots.earliest_id() == _model_earliest(COMMITS)
