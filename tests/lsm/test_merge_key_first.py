"""A bucket merged key first (``lsm.merge.key_first``: the keys' merge alone, then the
survivors' value columns gathered group by group, or every version's reduced group by group)
writes the same rows, sequence numbers and row kinds, and counts the same rows, as the merge
of whole rows, for every engine that picks rows by key: deduplicate (with -U/-D, with a
sequence field, thin files, ORC files), first-row and a deletion-vector table; and for the
engines that combine versions column by column: aggregation (retracting, removing a record
on delete, ignoring retractions, with listagg, with a function merged per key) and
partial-update (ignoring deletes, removing a record on delete), on the same kinds of tables.
The merge is forced onto narrow tables and cut as finely as it can be (a column per group,
4-row chunks), so that every run is read and taken from many times. Which tasks go key
first, how a layout is cut and what the memory budget gives a key-first task are checked on
their own. A table wide enough to merge key first by itself (80 columns), compacted by the
job, reads as an independent model says in pypaimon and in every Java release; so do tables
compacted round after round with every compaction forced key first. A key-first merge that
fails leaves no file behind."""

from __future__ import annotations

import datetime
import json
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.compaction_files import entry_rows, file_per_batch_writer
from support.dv_scenarios import SCENARIOS, Live, Scenario
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import (
    TableWriter,
    build_pk_deduplicate,
    build_pk_deduplicate_orc,
    build_pk_deletion_vectors,
    build_pk_first_row,
    catalog_for,
    seeded_rng,
)

from paimond.clock import Clock
from paimond.lsm import rewrite
from paimond.lsm.merge import key_first
from paimond.lsm.merge.key_first import KEY_FIRST_COLUMNS, merges_key_first, plan_key_first
from paimond.lsm.merge.spill import file_reader_bytes, value_width
from paimond.lsm.rewrite import execute_compaction
from paimond.lsm.task import CompactResult, CompactTask
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.compact.memory import (
    LARGE_BUDGET_DECAY_MS,
    MIN_BATCH_ROWS,
    fit_batch_rows,
    unbudgeted_decay_ms,
)
from paimond.maintenance.compact.plan import plan_compaction
from paimond.table.catalog import open_table
from paimond.table.options.merge import MergeConfig
from paimond.table.storage.interface import open_storage

MOMENT = datetime.datetime(2026, 12, 1, 12)


def _sequenced_thin(warehouse: str) -> Any:
    """Deduplicate by a ``sequence.field`` (arriving out of order), thin data files, one
    bucket, 8 overlapping commits."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()),
                        ("v", pa.string()), ("w", pa.float64())])
    writer = TableWriter(catalog_for(warehouse), "db.sequenced", schema, primary_keys=("id",),
                         options={"bucket": "1", "sequence.field": "ts",
                                  "data-file.thin-mode": "true"})
    for commit in range(8):
        rng = seeded_rng(f"sequenced{commit}")
        writer.commit([{"id": i, "ts": rng.randrange(50), "v": f"{commit}-{i}",
                        "w": rng.random()} for i in sorted(rng.sample(range(400), 150))])
    return type("Spec", (), {"name": "db.sequenced"})


def _recast(build: Callable[[str], Any], options: dict[str, str]) -> Callable[[str], Any]:
    """The table ``build`` writes, its schema's options then changed by ``options``.
    pypaimon writes no -U/-D row into a partial-update or aggregation table, so those tables
    are written as deduplicate ones (their files are laid out alike) and recast."""
    def recast(warehouse: str) -> Any:
        spec = build(warehouse)
        (schema_file,) = Path(warehouse).glob("*.db/*/schema/schema-*")
        schema = json.loads(schema_file.read_text())
        schema["options"] |= options
        schema_file.write_text(json.dumps(schema))
        return spec
    return recast


BUILDERS: dict[str, Callable[[str], Any]] = {
    "deduplicate": build_pk_deduplicate, "first-row": build_pk_first_row,
    "deletion vectors": build_pk_deletion_vectors, "sequence field, thin": _sequenced_thin,
    "deduplicate, orc": build_pk_deduplicate_orc,
    "aggregation, retracting": _recast(build_pk_deduplicate, {
        "merge-engine": "aggregation", "fields.score.aggregate-function": "sum",
        "fields.v.aggregate-function": "last_value"}),
    "aggregation, remove on delete": _recast(build_pk_deduplicate, {
        "merge-engine": "aggregation", "fields.score.aggregate-function": "sum",
        "aggregation.remove-record-on-delete": "true"}),
    "aggregation, ignoring retractions, orc": _recast(build_pk_deduplicate_orc, {
        "merge-engine": "aggregation", "fields.amount.aggregate-function": "sum",
        "fields.name.aggregate-function": "listagg", "fields.name.ignore-retract": "true",
        "fields.at.aggregate-function": "max", "fields.at.ignore-retract": "true"}),
    # distinct listagg merges per key in Python (lsm.merge.row_merge), over its group only
    "aggregation, per-key function": _recast(build_pk_deduplicate, {
        "merge-engine": "aggregation", "fields.v.aggregate-function": "listagg",
        "fields.v.distinct": "true", "fields.v.ignore-retract": "true",
        "fields.score.aggregate-function": "sum"}),
    "aggregation, sequence field, thin": _recast(_sequenced_thin, {
        "merge-engine": "aggregation", "fields.w.aggregate-function": "sum",
        "fields.v.aggregate-function": "listagg"}),
    "aggregation, deletion vectors": _recast(build_pk_deletion_vectors, {
        "merge-engine": "aggregation", "fields.v.aggregate-function": "last_value"}),
    "partial-update, ignoring deletes": _recast(build_pk_deduplicate, {
        "merge-engine": "partial-update", "ignore-delete": "true"}),
    "partial-update, remove on delete": _recast(build_pk_deduplicate, {
        "merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"}),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    root = tmp_path_factory.mktemp("key_first")
    tables = {}
    for kind, build in BUILDERS.items():
        warehouse = root / kind.replace(" ", "_").replace(",", "")
        tables[kind] = (warehouse, build(str(warehouse)).name)
    return tables


def _compact(warehouse: Path, name: str, copy: Path, **bound: int
             ) -> list[tuple[CompactResult, pa.Table]]:
    shutil.copytree(warehouse, copy)
    storage = open_storage(str(copy))
    table = open_table(storage, str(copy), name)
    tasks = plan_compaction(table, full=True, partitions=None, moment=MOMENT).tasks
    assert tasks
    return [(result, entry_rows(storage, task, result.added))
            for task in sorted(tasks, key=lambda t: (t.partition_text or "", t.bucket))
            for result in [execute_compaction(task, storage, now_millis=lambda: 0,
                                              batch_rows=16, **bound)]]


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_key_first_merge_writes_what_the_merge_of_whole_rows_writes(
        kind: str, built: dict[str, tuple[Path, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse, name = built[kind]
    whole = _compact(warehouse, name, tmp_path / "whole")
    spills = tmp_path / "spills"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    monkeypatch.setattr(key_first, "KEY_FIRST_COLUMNS", 1)  # every table is wide enough
    monkeypatch.setattr(key_first, "MIN_CHUNK_ROWS", 4)
    layouts: list[key_first.KeyFirstLayout] = []
    real_plan = key_first.plan_key_first

    def planned(*args: Any) -> key_first.KeyFirstLayout:
        layouts.append(real_plan(*args))
        return layouts[-1]

    monkeypatch.setattr("paimond.lsm.rewrite.plan_key_first", planned)
    # the least memory there is: a column per group, the smallest chunks and merge steps
    first = _compact(warehouse, name, tmp_path / "key_first", key_first_bytes=1)
    assert layouts and all(len(g) == 1 for layout in layouts for g in layout.groups)
    assert all(layout.chunk_rows == 4 and layout.slice_rows == 4 for layout in layouts)
    assert max(r.rows_written for r, _ in first) > 4  # more than one chunk
    assert len(whole) == len(first)
    for (one, rows), (other, rows_k) in zip(whole, first, strict=True):
        assert (one.rows_read, one.rows_written, one.rows_expired, one.rows_superseded) == \
            (other.rows_read, other.rows_written, other.rows_expired, other.rows_superseded)
        assert (one.files_rewritten, one.files_upgraded) == \
            (other.files_rewritten, other.files_upgraded)
        assert rows_k.equals(rows)
    assert not list(spills.iterdir())  # every spill directory deleted


def _wide_task(tmp_path: Path, columns: int, options: dict[str, str],
               recast: dict[str, str] | None = None) -> CompactTask:
    """A table of ``columns`` columns written with ``options`` (then ``recast`` by
    :func:`_recast`, for options pypaimon cannot write with), and its full compaction's
    one task."""
    fields = [pa.field("id", pa.int64(), nullable=False)]
    fields += [pa.field(f"c{i}", pa.int32()) for i in range(columns - 1)]
    schema = pa.schema(fields)
    writer = TableWriter(catalog_for(str(tmp_path)), "db.wide", schema, primary_keys=("id",),
                         options={"bucket": "1"} | options)
    for commit in range(2):
        writer.commit([{"id": i, **{f"c{c}": commit for c in range(columns - 1)}}
                       for i in range(10)])
    if recast:
        _recast(lambda _: None, recast)(str(tmp_path))
    table = open_table(open_storage(str(tmp_path)), str(tmp_path), "db.wide")
    tasks = plan_compaction(table, full=True, partitions=None, moment=MOMENT).tasks
    assert len(tasks) == 1
    return tasks[0]


@pytest.mark.parametrize(("columns", "options", "expected"), [
    (KEY_FIRST_COLUMNS, {}, True),
    (KEY_FIRST_COLUMNS, {"merge-engine": "first-row"}, True),
    (KEY_FIRST_COLUMNS - 4, {}, False),  # + _KEY_id, _SEQUENCE_NUMBER, _VALUE_KIND: 63
    (KEY_FIRST_COLUMNS, {"merge-engine": "partial-update"}, True),
    (KEY_FIRST_COLUMNS, {"merge-engine": "aggregation"}, True),
    (KEY_FIRST_COLUMNS, {"changelog-producer": "lookup"}, False),  # changelog needs them
    (KEY_FIRST_COLUMNS, {"file.format": "orc"}, True),
    (KEY_FIRST_COLUMNS, {"file.format": "avro"}, False),  # a group's read decodes every column
], ids=["deduplicate", "first-row", "narrower", "partial-update", "aggregation",
        "lookup changelog", "orc", "avro"])
def test_wide_tables_merge_key_first_unless_a_column_depends_on_another(
        columns: int, options: dict[str, str], expected: bool, tmp_path: Path) -> None:
    assert merges_key_first(_wide_task(tmp_path, columns, options)) is expected


def test_a_wide_table_with_a_sequence_group_merges_whole_rows(tmp_path: Path) -> None:
    """A sequence group's fields decide the values of its other columns: no column of the
    group merges apart from the others."""
    task = _wide_task(tmp_path, KEY_FIRST_COLUMNS, {"merge-engine": "partial-update"},
                      recast={"fields.c0.sequence-group": "c1"})
    assert MergeConfig.of(task.table.schema).sequence_groups
    assert not merges_key_first(task)


SCHEMA = pa.schema([("_KEY_id", pa.int64()), ("_SEQUENCE_NUMBER", pa.int64()),
                    ("_VALUE_KIND", pa.int8()), *((f"c{i}", pa.int64()) for i in range(40)),
                    *((f"s{i}", pa.string()) for i in range(10))])
NARROW = ["_KEY_id", "_SEQUENCE_NUMBER", "_VALUE_KIND"]
VALUES = [name for name in SCHEMA.names if name not in NARROW]


def _group_bytes(group: tuple[str, ...], run_rows: list[int], batch_rows: int,
                 chunk_rows: int, parquet: bool) -> int:
    """What reading ``group`` holds, as the layout's doc says: per run three batches and a
    file reader per column (Parquet files of at most four batches: their row group decoded
    whole and the next one's), and the chunk's columns twice."""
    total = 0
    for name in group:
        width = value_width(SCHEMA.field(name).type)
        for rows in run_rows:
            if parquet and rows <= 4 * batch_rows:
                total += 2 * rows * width
            else:
                total += 3 * min(batch_rows, rows) * width + file_reader_bytes(
                    pa.schema([SCHEMA.field(name)]), rows, 65536)
        total += 2 * chunk_rows * width
    return total


@pytest.mark.parametrize("parquet", [False, True], ids=["any format", "parquet"])
@pytest.mark.parametrize("memory_mb", [1, 16, 64, 4096])
def test_a_layout_puts_every_value_column_in_one_group_within_half_the_memory(
        memory_mb: int, parquet: bool) -> None:
    run_rows = [20000] * 12 + [90000]  # small files, and a run read streaming
    layout = plan_key_first(SCHEMA, NARROW, VALUES, run_rows, memory_mb << 20, 65536, 8192,
                            parquet)
    assert [name for group in layout.groups for name in group] == VALUES
    for group in layout.groups:
        held = _group_bytes(group, run_rows, 8192, layout.chunk_rows, parquet)
        assert len(group) == 1 or held <= (memory_mb << 20) // 2, (group, held)
        if group is not layout.groups[-1]:  # a group ends where the next column would not fit
            more = (*group, VALUES[VALUES.index(group[-1]) + 1])
            assert _group_bytes(more, run_rows, 8192, layout.chunk_rows, parquet) \
                > (memory_mb << 20) // 2
    row_width = sum(value_width(field.type) for field in SCHEMA) + 1
    assert layout.chunk_rows * row_width * 4 <= max(memory_mb << 20, 1024 * row_width * 4)
    if memory_mb == 4096:
        assert len(layout.groups) == 1 and layout.chunk_rows == key_first.MAX_CHUNK_ROWS
    if memory_mb == 1:
        assert len(layout.groups) == len(VALUES) and layout.chunk_rows == 1024


def test_a_key_first_task_merges_in_what_the_budget_leaves_beside_the_writer(
        tmp_path: Path) -> None:
    task = _wide_task(tmp_path, KEY_FIRST_COLUMNS, {})
    assert unbudgeted_decay_ms(task) == LARGE_BUDGET_DECAY_MS
    roomy = fit_batch_rows(task, 32768, 600 << 20)
    assert roomy.max_runs is None and roomy.reading_bytes is None  # no run is spilled
    assert roomy.batch_rows == 32768 and roomy.estimate_bytes == 600 << 20
    assert 0 < roomy.key_first_bytes < 600 << 20  # type: ignore[operator]
    assert fit_batch_rows(task, 32768, 64 << 30).key_first_bytes == key_first.KEY_FIRST_BYTES
    tight = fit_batch_rows(task, 32768, 8 << 20)  # less than the fixed part alone
    assert tight.key_first_bytes == key_first.MIN_KEY_FIRST_BYTES
    run_rows = [e.file.row_count for e in task.inputs]
    half = key_first.MIN_KEY_FIRST_BYTES // 2
    # the largest batch whose keys' pass fits half the merge's memory (or the smallest batch)
    assert key_first.key_pass_bytes(task, run_rows, tight.batch_rows, 65536) <= half \
        or tight.batch_rows == MIN_BATCH_ROWS
    assert tight.batch_rows == 32768 \
        or key_first.key_pass_bytes(task, run_rows, 2 * tight.batch_rows, 65536) > half


def test_a_narrow_task_returns_freed_memory_at_once_without_a_budget(tmp_path: Path) -> None:
    assert unbudgeted_decay_ms(_wide_task(tmp_path, 8, {})) == 0


WIDE_COLUMNS = 80  # id and 79 values, int64 and string in turn, nullable


def _wide_values(rng: random.Random, commit: int, key: int) -> dict[str, Any]:
    row: dict[str, Any] = {"id": key}
    for column in range(WIDE_COLUMNS - 1):
        value = None if rng.random() < 0.1 else rng.randrange(-10**12, 10**12)
        row[f"c{column}"] = value if column % 2 or value is None else f"{commit}:{value}"
    return row


SUMMED = {f"fields.c{c}.aggregate-function": "sum" for c in range(1, WIDE_COLUMNS - 1, 4)}


def _folded(engine: str, old: dict[str, Any] | None, row: dict[str, Any]) -> dict[str, Any]:
    """The model of a key's row once ``row`` is merged into ``old`` (None: its first)."""
    if old is None or engine == "deduplicate":
        return row
    if engine == "first-row":
        return old
    folded = {}
    for name, value in row.items():
        before = old[name]
        if f"fields.{name}.aggregate-function" in SUMMED and engine == "aggregation":
            folded[name] = before if value is None else value if before is None \
                else before + value
        else:  # partial-update, and aggregation's default last_non_null_value
            folded[name] = before if value is None else value
    return folded


@pytest.mark.parametrize("options", [
    {}, {"deletion-vectors.enabled": "true"}, {"merge-engine": "first-row"},
    {"merge-engine": "partial-update"}, {"merge-engine": "aggregation"} | SUMMED,
], ids=["deduplicate", "deletion vectors", "first-row", "partial-update", "aggregation"])
def test_java_and_pypaimon_read_a_wide_table_merged_key_first_as_its_model_says(
        options: dict[str, str], tmp_path: Path, java_readers_here: list[Any]) -> None:
    fields = [pa.field("id", pa.int64(), nullable=False)]
    fields += [pa.field(f"c{c}", pa.int64() if c % 2 else pa.string())
               for c in range(WIDE_COLUMNS - 1)]
    warehouse = str(tmp_path / "wh")
    writer = TableWriter(catalog_for(warehouse), "db.wide", pa.schema(fields),
                         primary_keys=("id",), options={"bucket": "1"} | options)
    engine = options.get("merge-engine", "deduplicate")
    model: dict[int, dict[str, Any]] = {}
    for commit in range(6):
        rng = seeded_rng(f"wide{commit}")
        rows = [_wide_values(rng, commit, key) for key in sorted(rng.sample(range(3000), 1200))]
        writer.commit(rows)
        for row in rows:
            model[row["id"]] = _folded(engine, model.get(row["id"]), row)
    table = open_table(open_storage(warehouse), warehouse, "db.wide")
    tasks = plan_compaction(table, full=True, partitions=None, moment=MOMENT).tasks
    assert tasks and all(merges_key_first(task) for task in tasks)
    summary = CompactJob(table, clock=Clock(fixed_ms=0), full=True, use_processes=False).run()
    assert sum(r.rows_read for r in summary.results) == 6 * 1200
    expected = [model[key] for key in sorted(model)]
    assert read_rows(warehouse, "db.wide").to_pylist() == expected
    names = [field.name for field in fields]
    for reader in java_readers_here:
        rows = reader.read_rows(table.path)
        assert sorted((json.loads(r) for r in rows), key=lambda r: r[0]) == \
            [[row[name] for name in names] for row in expected], reader.release


@pytest.mark.parametrize("kind", ["first-row", "aggregation, retracting"])
@pytest.mark.parametrize("failure", ["keys", "values", "rows"])
def test_a_key_first_merge_that_fails_leaves_no_file_behind(
        failure: str, kind: str, built: dict[str, tuple[Path, str]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure in the keys' merge, in a group's gathering or while rows are written (after
    some files were finished): the error propagates, and neither a data file nor a spill file
    is left."""
    warehouse = tmp_path / "wh"
    shutil.copytree(built[kind][0], warehouse)
    spills = tmp_path / "spills"
    spills.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spills))
    monkeypatch.setattr(key_first, "KEY_FIRST_COLUMNS", 1)
    monkeypatch.setattr(key_first, "MIN_CHUNK_ROWS", 4)
    stage = {"keys": "_rechunked", "values": "_taken", "rows": "_assembled"}[failure]
    real = getattr(key_first, stage)

    def failing(*args: Any, **named: Any) -> Any:
        for count, table in enumerate(real(*args, **named)):
            if count == 3:
                raise OSError("disk full")
            yield table

    monkeypatch.setattr(key_first, stage, failing)
    published: list[str] = []
    monkeypatch.setattr(rewrite, "RollingDataFileWriter", file_per_batch_writer(published))
    before = {p for p in warehouse.rglob("bucket-*/*")}
    storage = open_storage(str(warehouse))
    table = open_table(storage, str(warehouse), built[kind][1])
    task = max(plan_compaction(table, full=True, partitions=None, moment=MOMENT).tasks,
               key=lambda t: sum(e.file.row_count for e in t.inputs))
    with pytest.raises(OSError, match="disk full"):
        execute_compaction(task, storage, now_millis=lambda: 0, batch_rows=4, key_first_bytes=1)
    assert bool(published) is (failure == "rows")  # files were done before it failed
    assert {p for p in warehouse.rglob("bucket-*/*")} == before
    assert not list(spills.iterdir())


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS
                                      if s.options.get("file.format") in ("parquet", "orc")],
                         ids=lambda s: s.name)
def test_compactions_merged_key_first_read_as_the_model_says_round_after_round(
        scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits and compactions in turn (deduplicate, by a sequence field, aggregation, with
    deletion vectors; first-row), every compaction forced key first and cut as finely as it
    goes: pypaimon reads what the model holds after each, and the deletion-vector tables'
    level-0 keys found in the files above joined the merges (the aggregation's as one more
    run)."""
    monkeypatch.setattr(key_first, "KEY_FIRST_COLUMNS", 1)
    monkeypatch.setattr(key_first, "MIN_CHUNK_ROWS", 4)
    monkeypatch.setattr(rewrite, "KEY_FIRST_BYTES", 1)
    planned = []
    real_merge = rewrite.merge_key_first

    def merged_key_first(*args: Any) -> Any:
        planned.append(args[4])
        return real_merge(*args)

    monkeypatch.setattr(rewrite, "merge_key_first", merged_key_first)
    live = Live(scenario, str(tmp_path / "wh"))
    superseded = 0
    for round_no in range(5):
        live.write(30 if round_no else 50)
        summaries = live.compact(full=round_no == 3)
        superseded += sum(r.rows_superseded for s in summaries for r in s.results)
        assert read_rows(live.warehouse, live.name).equals(live.expected()), round_no
    assert planned and all(layout.chunk_rows == 4 for layout in planned)
    if scenario.options.get("deletion-vectors.enabled") == "true":
        assert superseded > 0, "no compaction looked up and superseded an older row"
