"""``rescale``: partitions rewritten into another number of buckets, the same rows. Judged by
Java Paimon's read (1.4, 2.0; every row in the bucket Java's ``FixedBucketRowKeyExtractor``
gives it for the new number) and pypaimon's, against a model of the rows; Java 2.0's writer
and paimond keep going afterwards; refused where Paimon refuses or the rewrite would lose
rows; a commit since the plan fails it and leaves nothing behind."""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.java_maintainer import JavaMaintainer
from support.java_paimon import RELEASES
from support.java_reader import JavaReader, canonical_rows
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import MergeModel, TableWriter, catalog_for, seeded_rng

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.errors import CommitConflictError, RefusedError
from paimond.maintenance.compact import external_sort
from paimond.maintenance.compact import rescale as rescale_module
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.rescale import RescalePlan, RescaleSummary, rescale
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

NAME = "db.t"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False),
                    pa.field("dt", pa.string(), nullable=False), pa.field("v", pa.string())])
CLOCK = Clock(fixed_ms=1_700_000_000_000)
# Java's readers of the releases that have postpone buckets (1.1 and later: 1.0 refuses to
# open a table with bucket = -2)
POSTPONE_READERS = pytest.mark.parametrize(
    "java_reader", [r for r in RELEASES if r != "1.0"], indirect=True, ids=lambda r: f"java{r}")
DAYS = ("2024-01-01", "2024-01-02")


def _table(tmp_path: Path, options: dict[str, str]) -> tuple[str, TableWriter, Table]:
    warehouse = str(tmp_path / "wh")
    writer = TableWriter(catalog_for(warehouse), NAME, SCHEMA, primary_keys=("id", "dt"),
                         partition_keys=("dt",), options=options)
    return warehouse, writer, open_table(open_storage(warehouse), warehouse, NAME)


def _commit(writer: TableWriter, model: MergeModel, seed: str, rows: int) -> None:
    rng = seeded_rng(seed)
    batch = [{"id": rng.randrange(60), "dt": rng.choice(DAYS), "v": f"{seed}-{i}"}
             for i in range(rows)]
    writer.commit(batch)
    for row in batch:
        model.apply(row)


def _model(model: MergeModel) -> collections.Counter[str]:
    return collections.Counter(canonical_rows(pa.Table.from_pylist(model.rows(), schema=SCHEMA),
                                              list(SCHEMA.names)))


def _buckets(table: Table) -> set[tuple[str, int, int]]:
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    return {(e.partition.hex(), e.bucket, e.total_buckets)
            for e in (f.entry for f in scan_snapshot(table, snapshot).files)}


def _judged(java_reader: JavaReader, warehouse: str, table: Table, model: MergeModel,
            buckets: int) -> None:
    java = java_reader.read(Path(table.path), check_buckets=buckets)
    assert collections.Counter(java.rows) == _model(model)
    assert java.buckets == {"checked": len(model.rows()), "mismatched": 0}
    assert collections.Counter(canonical_rows(read_rows(warehouse, NAME),
                                              list(SCHEMA.names))) == _model(model)
    assert {total for _, bucket, total in _buckets(table)} == {buckets}
    assert {bucket for _, bucket, _ in _buckets(table)} <= set(range(buckets))


def _java_write(java_maintainer: JavaMaintainer, table: Table, model: MergeModel, seed: str
                ) -> None:
    rng = seeded_rng(seed)
    rows: list[list[Any]] = []
    for i in range(30):
        row = {"id": rng.randrange(60), "dt": rng.choice(DAYS), "v": f"{seed}-{i}"}
        kind = "-D" if rng.random() < 0.2 else "+I"
        rows.append([kind, row["id"], row["dt"], row["v"]])
        model.apply({**row, "rk": kind})
    java_maintainer.write(table.path, rows)


@POSTPONE_READERS
def test_a_postpone_table_rescaled_up_and_down(tmp_path: Path, java_reader: JavaReader,
                                               java_maintainer: JavaMaintainer) -> None:
    warehouse, writer, table = _table(tmp_path, {"bucket": "-2",
                                                 "postpone.default-bucket-num": "3"})
    model = MergeModel("deduplicate", ("id", "dt"))
    for seed in ("a", "b", "c"):
        _commit(writer, model, seed, 50)
    CompactJob(table, clock=CLOCK, use_processes=False).run()
    _judged(java_reader, warehouse, table, model, 3)

    for buckets in (6, 3):  # 2x, then 0.5x
        plan = rescale(table, buckets, clock=CLOCK, dry_run=True)
        assert isinstance(plan, RescalePlan) and len(plan.partitions) == 2
        summary = rescale(table, buckets, clock=CLOCK)
        assert isinstance(summary, RescaleSummary) and summary.snapshot is not None
        assert summary.snapshot.commit_kind == "OVERWRITE"
        assert summary.rows_written == len(model.rows())
        _judged(java_reader, warehouse, table, model, buckets)

    # writers keep going: pypaimon and Java into the postpone bucket, paimond moves their rows
    # into the partitions' new number of buckets
    _commit(writer, model, "d", 30)
    _java_write(java_maintainer, table, model, "java")
    CompactJob(table, clock=CLOCK, use_processes=False).run()
    _judged(java_reader, warehouse, table, model, 3)


def _alter(table: Table, **options: str) -> None:
    """A new schema file with these options (Java's ALTER TABLE ... SET)."""
    folder = Path(table.path) / "schema"
    latest = max(int(p.name.split("-")[1]) for p in folder.glob("schema-*"))
    schema = json.loads((folder / f"schema-{latest}").read_text())
    schema["id"], schema["options"] = latest + 1, {**schema["options"], **options}
    (folder / f"schema-{latest + 1}").write_text(json.dumps(schema))


@pytest.mark.parametrize("dv", [False, True], ids=["plain", "deletion-vectors"])
def test_a_fixed_bucket_table_after_its_option_changed(tmp_path: Path, java_reader: JavaReader,
                                                       java_maintainer: JavaMaintainer,
                                                       dv: bool) -> None:
    options = {"bucket": "2", **({"deletion-vectors.enabled": "true"} if dv else {})}
    warehouse, writer, table = _table(tmp_path, options)
    model = MergeModel("deduplicate", ("id", "dt"))
    for seed in ("a", "b", "c", "d"):
        _commit(writer, model, seed, 40)
        CompactJob(table, clock=CLOCK, use_processes=False).run()  # levels, vectors
    if dv:
        latest = table.snapshots.latest()
        assert latest is not None and scan_snapshot(table, latest).index_entries

    with pytest.raises(RefusedError, match=r"ALTER TABLE .* SET \('bucket' = '5'\)"):
        rescale(table, 5, clock=CLOCK)
    _alter(table, bucket="5")
    summary = rescale(table, None, clock=CLOCK)
    assert isinstance(summary, RescaleSummary) and summary.plan.bucket_num == 5
    latest = table.snapshots.latest()
    assert latest is not None and not scan_snapshot(table, latest).index_entries
    if java_reader.release != "1.0" or not dv:
        _judged(java_reader, warehouse, table, model, 5)
    _java_write(java_maintainer, table, model, "java")  # Java writes 5 buckets now
    CompactJob(table, clock=CLOCK, use_processes=False).run()
    if java_reader.release != "1.0" or not dv:
        _judged(java_reader, warehouse, table, model, 5)


def test_refusals(tmp_path: Path) -> None:
    _, postpone, table = _table(tmp_path / "p", {"bucket": "-2"})
    with pytest.raises(RefusedError, match="no snapshot"):
        rescale(table, 2, clock=CLOCK)
    postpone.commit([{"id": 1, "dt": DAYS[0], "v": "a"}])
    with pytest.raises(RefusedError, match="must provide the resulting bucket number"):
        rescale(table, None, clock=CLOCK)
    with pytest.raises(RefusedError, match="1 rows in bucket-postpone.*compact"):
        rescale(table, 2, clock=CLOCK)
    _, dynamic, table = _table(tmp_path / "d", {"bucket": "-1"})
    dynamic.commit([{"id": 1, "dt": DAYS[0], "v": "a"}])
    with pytest.raises(RefusedError, match="bucket=-1"):
        rescale(table, 2, clock=CLOCK)
    assert table.snapshots.latest_id() == 1


def test_a_commit_since_the_plan_fails_it_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's strict mode: the rows of a commit made while the rewrite ran would be lost."""
    warehouse, writer, table = _table(tmp_path, {"bucket": "2"})
    model = MergeModel("deduplicate", ("id", "dt"))
    _commit(writer, model, "a", 40)
    _alter(table, bucket="4")
    original = rescale_module._Rewriter.rewrite
    raced: list[int] = []

    def racing(self: Any, partition: Any) -> None:
        original(self, partition)
        if not raced:  # a writer commits while the rewrite runs
            _commit(writer, model, "b", 10)
            raced.append(1)

    monkeypatch.setattr(rescale_module._Rewriter, "rewrite", racing)
    files_before = {p for p in Path(table.path).rglob("*.parquet")}
    with pytest.raises(CommitConflictError):
        rescale(table, None, clock=CLOCK)
    latest = table.snapshots.latest()
    assert latest is not None and latest.id == 2 and latest.commit_kind == "APPEND"
    new_files = {p for p in Path(table.path).rglob("*.parquet")} - files_before
    live = {f.entry.file.file_name for f in scan_snapshot(table, latest).files}
    assert {p.name for p in new_files} <= live  # only the writer's: the rewrite's are gone
    assert collections.Counter(canonical_rows(read_rows(warehouse, NAME),
                                              list(SCHEMA.names))) == _model(model)


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse, writer, table = _table(tmp_path, {"bucket": "-2"})
    writer.commit([{"id": i, "dt": DAYS[i % 2], "v": "a"} for i in range(20)])
    assert main(["rescale", warehouse, "--table", NAME, "--bucket-num", "2"]) == 1
    assert "run `paimond compact` first" in capsys.readouterr().err
    assert main(["compact", warehouse, "--table", NAME]) == 0
    capsys.readouterr()
    assert main(["rescale", warehouse, "--table", NAME, "--bucket-num", "2",
                 "--partition", f"dt={DAYS[0]}", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"dt={DAYS[0]}: 1 files, 10 rows in 1 bucket(s) -> 2" in out and DAYS[1] not in out
    snapshot = table.snapshots.latest_id()
    assert main(["rescale", warehouse, "--table", NAME, "--bucket-num", "2",
                 "--partition", f"dt={DAYS[0]}"]) == 0
    assert table.snapshots.latest_id() == (snapshot or 0) + 1
    assert sorted((b, t) for _, b, t in _buckets(table)) == [(0, 1), (0, 2), (1, 2)]
    with pytest.raises(SystemExit) as usage:
        main(["rescale", warehouse, "--table", NAME, "--bucket-num", "0"])
    assert usage.value.code == 2 and "must be an integer >= 1" in capsys.readouterr().err


def test_pending_changelog_is_refused_until_compacted(tmp_path: Path) -> None:
    """``changelog-producer = lookup``: files below the max level still owe their changelog,
    which compaction produces; the rewrite would drop it, so it waits for a full compaction."""
    _, writer, table = _table(tmp_path, {"bucket": "2", "changelog-producer": "lookup"})
    writer.commit([{"id": i, "dt": DAYS[0], "v": "a"} for i in range(10)])
    _alter(table, bucket="3")
    with pytest.raises(RefusedError, match="changelog-producer=lookup.*compact --full"):
        rescale(table, None, clock=CLOCK)
    assert table.snapshots.latest_id() == 1
    CompactJob(table, full=True, clock=CLOCK, use_processes=False).run()
    summary = rescale(table, None, clock=CLOCK)
    assert isinstance(summary, RescaleSummary) and summary.rows_written == 10


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_a_partition_beyond_the_budget_goes_through_spill_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> None:
    """A budget far below the partition's rows: the rows are sorted through spilled runs and
    merged a batch at a time (batches of 7 rows here), a key's versions together even where a
    batch ends among them;
    each new bucket is one sorted run of strictly ascending keys, and the rows are the model's."""
    warehouse, writer, table = _table(tmp_path, {"bucket": "2", "merge-engine": engine})
    model = MergeModel(engine, ("id", "dt"))
    rng = seeded_rng(engine)
    for commit in range(6):
        batch = [{"id": rng.randrange(3000), "dt": DAYS[0],
                  "v": None if engine == "partial-update" and rng.random() < 0.3
                  else f"{commit}-{i}"} for i in range(2500)]
        batch = list({row["id"]: row for row in batch}.values())  # a key once per commit
        writer.commit(batch)
        for row in batch:
            model.apply(row)
    _alter(table, bucket="3")
    spilled: list[str] = []
    original = external_sort._spill

    def counted(*args: Any) -> str:
        spilled.append(original(*args))
        return spilled[-1]

    monkeypatch.setattr(external_sort, "_spill", counted)
    sort = rescale_module.sorted_batches

    def small_batches(*args: Any) -> Iterator[pa.RecordBatch]:
        """The sorted rows 7 at a time: batches end among a key's versions."""
        for batch in sort(*args):
            yield from (batch.slice(start, 7) for start in range(0, batch.num_rows, 7))

    monkeypatch.setattr(rescale_module, "sorted_batches", small_batches)
    summary = rescale(table, None, clock=CLOCK, memory_budget_bytes=32 << 10)
    assert isinstance(summary, RescaleSummary)
    assert len(spilled) >= 8 and not any(Path(p).exists() for p in spilled)
    assert summary.rows_written == len(model.rows())
    assert collections.Counter(canonical_rows(read_rows(warehouse, NAME),
                                              list(SCHEMA.names))) == _model(model)
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    runs: dict[int, list[list[int]]] = collections.defaultdict(list)
    for live in scan_snapshot(table, snapshot).files:
        entry = live.entry
        path = Path(table.path) / f"dt={DAYS[0]}" / f"bucket-{entry.bucket}" / entry.file.file_name
        keys = pq.ParquetFile(path).read(columns=["_KEY_id"]).column(0).to_pylist()
        assert keys == sorted(set(keys)) and entry.file.level == 5
        runs[entry.bucket].append(keys)
    assert sorted(runs) == [0, 1, 2]
    for files in runs.values():  # one sorted run: the files' key ranges do not overlap
        files.sort()
        assert all(a[-1] < b[0] for a, b in zip(files, files[1:], strict=False))
