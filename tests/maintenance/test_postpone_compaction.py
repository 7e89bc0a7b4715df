"""Postpone-bucket tables (``bucket = -2``) written by pypaimon 2.1.0: readers skip the
postpone bucket, so until paimond moves its rows into real buckets none of them is visible.
Checked after ``compact`` against a model of the rows (the later write of a key wins, or the
merge engine combines them), pypaimon's read and Java Paimon's read (1.4, 2.0; 1.0 has no postpone mode), with
every row in the bucket Java's own ``FixedBucketRowKeyExtractor`` gives it; the bucket number
decided as Paimon decides it and then kept; a failure halfway leaves nothing behind."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry
from pypaimon.schema.data_types import AtomicType
from pypaimon.schema.schema_change import SchemaChange
from support.java_maintainer import JavaMaintainer
from support.java_paimon import RELEASES
from support.java_reader import JavaReader, canonical_rows
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import MergeModel, TableWriter, catalog_for, seeded_rng

from paimond.cli.report import render_text
from paimond.clock import Clock
from paimond.config.settings import load_settings
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.daemon.tables import evaluate
from paimond.errors import RefusedError
from paimond.maintenance.compact import job as job_module
from paimond.maintenance.compact import postpone
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.expire.snapshots import ExpireJob
from paimond.maintenance.jobs import ROUTINE
from paimond.table.catalog import Table, open_table
from paimond.table.commit.committer import MAX_SEQUENCE_NUMBER_PROPERTY
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.status.report import table_status
from paimond.table.storage.interface import open_storage

NAME = "db.t"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.string()), pa.field("n", pa.int64())])
CLOCK = Clock(fixed_ms=1_700_000_000_000)
# Java's readers of the releases that have postpone buckets (1.1 and later: 1.0 refuses to
# open a table with bucket = -2)
POSTPONE_READERS = pytest.mark.parametrize(
    "java_reader", [r for r in RELEASES if r != "1.0"], indirect=True, ids=lambda r: f"java{r}")


def _table(tmp_path: Path, options: dict[str, str]) -> tuple[str, TableWriter, Table]:
    warehouse = str(tmp_path / "wh")
    writer = TableWriter(catalog_for(warehouse), NAME, SCHEMA, primary_keys=("id", "dt"),
                         partition_keys=("dt",), options={"bucket": "-2", **options})
    return warehouse, writer, open_table(open_storage(warehouse), warehouse, NAME)


def _commit_random(writer: TableWriter, model: MergeModel, seed: str, rows: int) -> None:
    rng = seeded_rng(seed)
    batch = [{"id": rng.randrange(40), "dt": rng.choice(["2024-01-01", "2024-01-02"]),
              "v": f"{seed}-{i}", "n": rng.randrange(100)} for i in range(rows)]
    writer.commit(batch)
    for row in batch:  # a writer's buffer keeps the last row of a key within one commit
        model.apply(row)


def _rows(table: pa.Table) -> collections.Counter[str]:
    return collections.Counter(canonical_rows(table, list(SCHEMA.names)))


def _model_rows(model: MergeModel) -> collections.Counter[str]:
    return _rows(pa.Table.from_pylist(model.rows(), schema=SCHEMA))


def _real_buckets(table: Table) -> dict[str, set[tuple[int, int]]]:
    """Per partition directory, the (bucket, total buckets) of the live files."""
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    found: dict[str, set[tuple[int, int]]] = collections.defaultdict(set)
    for live in scan_snapshot(table, snapshot).files:
        found[live.entry.partition.hex()].add((live.entry.bucket, live.entry.total_buckets))
    return found


@POSTPONE_READERS
def test_postpone_rows_become_visible_in_javas_buckets(tmp_path: Path, java_reader: JavaReader
                                                       ) -> None:
    warehouse, writer, table = _table(tmp_path, {"postpone.default-bucket-num": "3"})
    model = MergeModel("deduplicate", ("id", "dt"))
    for commit in range(3):
        _commit_random(writer, model, f"c{commit}", 50)
    assert read_rows(warehouse, NAME).num_rows == 0  # the problem: nothing visible yet

    summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert summary.postpone is not None and summary.postpone.snapshot is not None
    assert summary.postpone.rows_read == 150
    assert _rows(read_rows(warehouse, NAME)) == _model_rows(model)
    java = java_reader.read(Path(table.path), check_buckets=3)
    assert collections.Counter(java.rows) == _model_rows(model)
    assert java.buckets == {"checked": len(model.rows()), "mismatched": 0}
    wrong = java_reader.read(Path(table.path), check_buckets=2).buckets  # the check can fail
    assert wrong is not None and wrong["mismatched"] > 0
    for buckets in _real_buckets(table).values():
        assert {total for _, total in buckets} == {3} and {b for b, _ in buckets} <= {0, 1, 2}

    # later writes land in the same buckets and win over what the buckets hold
    for commit in range(3, 5):
        _commit_random(writer, model, f"c{commit}", 30)
    CompactJob(table, clock=CLOCK, use_processes=False).run()
    java = java_reader.read(Path(table.path), check_buckets=3)
    assert collections.Counter(java.rows) == _model_rows(model)
    assert java.buckets == {"checked": len(model.rows()), "mismatched": 0}
    assert _rows(read_rows(warehouse, NAME)) == _model_rows(model)


def test_bucket_number_decided_once_per_partition(tmp_path: Path) -> None:
    warehouse, writer, table = _table(tmp_path, {"postpone.target-row-num-per-bucket": "4"})
    writer.commit([{"id": i, "dt": "2024-01-01", "v": "a", "n": i} for i in range(9)])
    writer.commit([{"id": i, "dt": "2024-01-02", "v": "b", "n": i} for i in range(2)])
    plan = CompactJob(table, clock=CLOCK, use_processes=False).plan()
    assert plan.postpone is not None
    decided = {p.text: (p.num_buckets, p.decided_by) for p in plan.postpone.partitions}
    assert decided == {"dt=2024-01-01": (3, "postpone.target-row-num-per-bucket"),
                       "dt=2024-01-02": (1, "postpone.target-row-num-per-bucket")}
    assert table.snapshots.latest_id() == 2  # a plan writes nothing

    CompactJob(table, clock=CLOCK, use_processes=False).run()
    writer.commit([{"id": i, "dt": "2024-01-02", "v": "c", "n": i} for i in range(40)])
    plan = CompactJob(table, clock=CLOCK, use_processes=False).plan()
    assert plan.postpone is not None
    assert [(p.num_buckets, p.decided_by) for p in plan.postpone.partitions] == [
        (1, "the partition's buckets")]  # kept, though 40 rows would have made 10
    CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert read_rows(warehouse, NAME).num_rows == 9 + 40


def test_size_estimate_without_options(tmp_path: Path) -> None:
    _, writer, table = _table(tmp_path, {"postpone.target-size-per-bucket": "1 kb"})
    writer.commit([{"id": i, "dt": "d", "v": "x" * 100, "n": i} for i in range(200)])
    plan = CompactJob(table, clock=CLOCK, use_processes=False).plan()
    assert plan.postpone is not None
    (partition,) = plan.postpone.partitions
    assert partition.decided_by == "postpone.target-size-per-bucket"
    assert partition.num_buckets == (partition.bytes - 1) // 1024 + 1 > 1


def test_aggregation_merges_postpone_rows_with_bucket_rows(tmp_path: Path) -> None:
    warehouse, writer, table = _table(tmp_path, {
        "merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
        "postpone.default-bucket-num": "2"})
    model = MergeModel("aggregation", ("id", "dt"), {"n": "sum"})
    rows_per_commit = [[{"id": i % 5, "dt": "d", "v": f"c{c}", "n": i} for i in range(8)]
                       for c in range(4)]
    for number, rows in enumerate(rows_per_commit):
        writer.commit(rows)
        for row in rows:
            model.apply(row)
        if number == 1:  # half of the rows reach the buckets first
            CompactJob(table, clock=CLOCK, use_processes=False).run()
    CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert _rows(read_rows(warehouse, NAME)) == _model_rows(model)


def test_refused_before_anything_is_written(tmp_path: Path) -> None:
    _, writer, table = _table(tmp_path, {"bucket-function.type": "hive"})
    writer.commit([{"id": 1, "dt": "d", "v": "a", "n": 1}])
    with pytest.raises(RefusedError, match="bucket-function.type=hive"):
        CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert table.snapshots.latest_id() == 1
    ExpireJob(table, clock=CLOCK).run()  # the table's other jobs still run


def test_a_failure_halfway_leaves_no_file_and_no_snapshot(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _, writer, table = _table(tmp_path, {"postpone.default-bucket-num": "4"})
    writer.commit([{"id": i, "dt": "d", "v": "a", "n": i} for i in range(50)])
    before = sorted(p.relative_to(table.path) for p in Path(table.path).rglob("*") if p.is_file())
    written: list[Any] = []
    original = postpone.PostponeMover._write_bucket

    def fail_third(self: postpone.PostponeMover, moved: Any, bucket: int, rows: pa.Table,
                   *rest: Any) -> None:
        if len(written) == 2:
            raise OSError("disk full")
        written.append(bucket)
        original(self, moved, bucket, rows, *rest)

    monkeypatch.setattr(postpone.PostponeMover, "_write_bucket", fail_third)
    with pytest.raises(OSError, match="disk full"):
        CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert len(written) == 2  # two buckets' files were written, then deleted
    after = sorted(p.relative_to(table.path) for p in Path(table.path).rglob("*") if p.is_file())
    assert after == before and table.snapshots.latest_id() == 1


def test_status_and_a_daemon_pass(tmp_path: Path) -> None:
    """``status`` shows the invisible rows and the age of the oldest; one daemon pass moves
    them (the table is write-only: paimond is its only maintainer); the daemon's urgency
    grows with their age and number; the age gauge ages with the clock."""
    warehouse, writer, table = _table(tmp_path, {"write-only": "true"})
    writer.commit([{"id": i, "dt": "d", "v": "a", "n": i} for i in range(30)])
    status = table_status(table)
    oldest = status.postpone_oldest_millis
    assert status.postpone_rows == 30 and oldest is not None
    assert status.to_json()["postpone"] == {"invisible_rows": 30, "oldest_file_millis": oldest}
    assert "postpone bucket: 30 rows no reader sees" in render_text(status)
    assert evaluate.health(status).gauges["postpone_rows"] == 30  # type: ignore[union-attr]
    assert 0 < evaluate.postpone_urgency(status, oldest + 60_000) < evaluate.postpone_urgency(
        status, oldest + 600_000)

    daemon = Daemon(load_settings(None, env={"PAIMOND_WAREHOUSE": warehouse}, jobs=ROUTINE),
                    Metrics(CollectorRegistry(), CLOCK), clock=CLOCK)
    runs = daemon.run_once()
    assert [r.error for r in runs] == [None] and runs[0].reports["compact"].outcome == "success"
    assert read_rows(warehouse, NAME).num_rows == 30
    after = table_status(table)
    assert after.postpone_rows == 0 and after.postpone_oldest_millis is None
    assert evaluate.postpone_urgency(after, oldest + 600_000) == 0.0

    registry = CollectorRegistry()
    metrics = Metrics(registry, CLOCK)
    metrics.set_postpone_oldest(NAME, CLOCK.local_ms() - 90_000)
    assert registry.get_sample_value("paimond_table_postpone_age_seconds",
                                     {"table": NAME}) == pytest.approx(90.0)


def test_snapshot_sequence_tables_number_after_the_recorded_highest(tmp_path: Path) -> None:
    """``write.sequence-number-init-mode = snapshot``: a real bucket's writer starts after the
    snapshot's recorded highest sequence number when that is above the bucket's own; so do
    the moved rows (Java ``startingMaxSequenceNumber``), and the commit records the new one."""
    _, writer, table = _table(tmp_path, {"write.sequence-number-init-mode": "snapshot",
                                         "postpone.default-bucket-num": "2"})
    writer.commit([{"id": i, "dt": "d", "v": "a", "n": i} for i in range(20)])
    CompactJob(table, clock=CLOCK, use_processes=False).run()
    latest = table.snapshots.latest()
    assert latest is not None and latest.properties is not None
    recorded = int(latest.properties[MAX_SEQUENCE_NUMBER_PROPERTY])
    written = table.snapshots.load(1)  # the writer's postpone file counts too, as in Java
    assert recorded == max(f.entry.file.max_sequence_number
                           for snapshot in (written, latest)
                           for f in scan_snapshot(table, snapshot).files)
    # a Java writer in snapshot mode committed and recorded a higher one (pypaimon records none)
    writer.commit([{"id": i, "dt": "d", "v": "b", "n": i} for i in range(5)])
    path = Path(table.snapshots.path(latest.id + 1))
    raw = json.loads(path.read_text())
    raw["properties"] = {MAX_SEQUENCE_NUMBER_PROPERTY: str(recorded + 1000)}
    path.write_text(json.dumps(raw))
    summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert summary.postpone is not None
    moved = [e.file for m in summary.postpone.moved for e in m.added]
    assert moved and min(f.min_sequence_number for f in moved) == recorded + 1001


@POSTPONE_READERS
def test_java_keeps_writing_into_the_table(tmp_path: Path, java_maintainer: JavaMaintainer,
                                           java_reader: JavaReader) -> None:
    """After paimond moved pypaimon's rows, Java 2.0's write-only writer commits into the
    postpone bucket (inserts, updates and deletes); paimond moves those too and Java and
    pypaimon read the model, every row in Java's bucket for it."""
    warehouse, writer, table = _table(tmp_path, {"postpone.default-bucket-num": "4"})
    model = MergeModel("deduplicate", ("id", "dt"))
    _commit_random(writer, model, "py", 60)
    CompactJob(table, clock=CLOCK, use_processes=False).run()
    for round_ in range(2):
        rng = seeded_rng(f"java{round_}")
        rows: list[list[Any]] = []
        for i in range(40):
            row = {"id": rng.randrange(40), "dt": rng.choice(["2024-01-01", "2024-01-02"]),
                   "v": f"java{round_}-{i}", "n": i}
            kind = "-D" if rng.random() < 0.2 else "+I"
            rows.append([kind, row["id"], row["dt"], row["v"], row["n"]])
            model.apply({**row, "rk": kind})
        java_maintainer.write(table.path, rows)
        summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
        assert summary.postpone is not None and summary.postpone.rows_read == 40
    java = java_reader.read(Path(table.path), check_buckets=4)
    assert collections.Counter(java.rows) == _model_rows(model)
    assert java.buckets == {"checked": len(model.rows()), "mismatched": 0}
    assert _rows(read_rows(warehouse, NAME)) == _model_rows(model)


@pytest.mark.parametrize("options", [
    {"deletion-vectors.enabled": "true"},
    {"merge-engine": "first-row"},
    {"merge-engine": "partial-update"},
    {"changelog-producer": "lookup"},
], ids=["deletion-vectors", "first-row", "partial-update", "lookup-changelog"])
@POSTPONE_READERS
def test_table_kinds_whose_readers_skip_level_0_or_merge_otherwise(
        tmp_path: Path, java_reader: JavaReader, options: dict[str, str]) -> None:
    """The moved rows land in level 0, which deletion-vector and first-row readers skip: the
    compaction that follows in the same run pushes them up, so every reader sees them."""
    engine = options.get("merge-engine", "deduplicate")
    warehouse, writer, table = _table(tmp_path, {"postpone.default-bucket-num": "2", **options})
    model = MergeModel(engine, ("id", "dt"))
    for commit in range(3):
        rng = seeded_rng(f"kinds{commit}")
        batch = [{"id": rng.randrange(30), "dt": "d",
                  "v": None if rng.random() < 0.3 else f"c{commit}",
                  "n": None if rng.random() < 0.3 else commit} for _ in range(40)]
        writer.commit(batch)
        for row in batch:
            model.apply(row)
        CompactJob(table, clock=CLOCK, use_processes=False).run()
    java = java_reader.read(Path(table.path), check_buckets=2)
    assert collections.Counter(java.rows) == _model_rows(model)
    assert java.buckets == {"checked": len(model.rows()), "mismatched": 0}
    assert _rows(read_rows(warehouse, NAME)) == _model_rows(model)


@pytest.mark.parametrize("accepted", [(), ("plugin.option",)], ids=["plain", "accepted-key"])
def test_rows_of_an_evolved_schema_keep_their_new_column(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        accepted: tuple[str, ...]) -> None:
    """A writer adds a column and writes rows with it while paimond's run is under way (after
    the run read the older schema): the moved rows keep the new column's values, the older
    rows read null there. The newer schema is refused again as the run's own was: an option
    key the operator accepted stays accepted."""
    options = {"postpone.default-bucket-num": "2", **dict.fromkeys(accepted, "x")}
    warehouse, writer, table = _table(tmp_path, options)
    writer.commit([{"id": i, "dt": "d", "v": "old", "n": i} for i in range(10)])
    evolved_schema = pa.schema([*SCHEMA, pa.field("note", pa.string())])

    def evolve_then_write() -> None:
        catalog_for(warehouse).alter_table(
            NAME, [SchemaChange.add_column("note", AtomicType("STRING"))], False)
        evolved = TableWriter.__new__(TableWriter)
        evolved.table = catalog_for(warehouse).get_table(NAME)
        evolved.write_schema = evolved_schema
        evolved.commits = 0
        evolved.commit([{"id": i, "dt": "d", "v": "new", "n": i, "note": f"n{i}"}
                        for i in range(5, 15)])

    original = job_module.move_postponed_rows

    def racing(*args: Any, **kwargs: Any) -> postpone.PostponeSummary:
        evolve_then_write()  # the run already read (and refused) schema 0
        return original(*args, **kwargs)

    monkeypatch.setattr(job_module, "move_postponed_rows", racing)
    CompactJob(table, clock=CLOCK, use_processes=False, accepted_options=accepted).run()
    rows = {r["id"]: r for r in read_rows(warehouse, NAME).to_pylist()}
    assert len(rows) == 15
    assert all(rows[i]["note"] is None and rows[i]["v"] == "old" for i in range(5))
    assert all(rows[i]["note"] == f"n{i}" and rows[i]["v"] == "new" for i in range(5, 15))


@POSTPONE_READERS
def test_input_changelog_of_the_moved_rows(tmp_path: Path, java_reader: JavaReader) -> None:
    """``changelog-producer = input``: Java's real-bucket writers write every row they are
    handed as changelog when they flush; the moved rows, unmerged, are the changelog of the
    commit that moves them, which Java's changelog scan reads."""
    _, writer, table = _table(tmp_path, {"changelog-producer": "input",
                                         "postpone.default-bucket-num": "2"})
    written: list[dict[str, Any]] = []
    for commit in range(3):
        rng = seeded_rng(f"input{commit}")
        batch = [{"id": rng.randrange(20), "dt": "d", "v": f"c{commit}", "n": i}
                 for i in range(15)]
        writer.commit(batch)
        written += batch
    before = table.snapshots.latest_id()
    summary = CompactJob(table, clock=CLOCK, use_processes=False).run()
    assert summary.postpone is not None and summary.postpone.snapshot is not None
    moved = summary.postpone.snapshot.id
    java = java_reader.read(Path(table.path), incremental=(before or 0, moved),
                            scan_mode="changelog")
    # every row the postpone files hold (pypaimon's postpone writer keeps each one)
    assert summary.postpone.rows_read == len(written)
    assert collections.Counter(java.rows) == _rows(pa.Table.from_pylist(written, schema=SCHEMA))
    assert set(java.row_kinds) == {"+I"}

