"""Record-level expiry in compaction (Java ``RecordLevelExpire``): pypaimon writes primary-key
tables whose time field is INT seconds, BIGINT seconds, BIGINT milliseconds, TIMESTAMP(3),
TIMESTAMP(6) or TIMESTAMP_LTZ, with rows from 1970, rows at and just past the TTL boundary,
recent rows and null times; after paimond's compaction pypaimon reads exactly the rows an
independent model keeps (each row filtered before the merge, as Java's wrapped reader does,
so an expired newest version lets the previous one through; null times are kept; Java's
reader agrees). Files are picked as Java picks them: a lone max-level file whose min time
statistic has expired is rewritten by a full compaction, a fresh one is not, and a large
expired file is rewritten where it would otherwise be upgraded. A deletion-vector table's
level-0 lookups skip expired keys."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for

from paimond.clock import Clock
from paimond.errors import ConfigError
from paimond.lsm.merge.record_expire import RecordExpiry, record_expiry_of
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import Table, open_table
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

NAME = "db.t"
NOW_S = 1_767_225_600  # 2026-01-01T00:00:00Z
NOW = Clock(fixed_ms=NOW_S * 1000)
DAY_S = 86_400
EPOCH = dt.datetime(1970, 1, 1)


# ---- the model ------------------------------------------------------------------------------


def _trunc_div(value: int, divisor: int) -> int:
    return value // divisor if value >= 0 else -(-value // divisor)


def model_seconds(kind: str, value: Any) -> int:
    """Java ``createFieldGetterAndConvertToSecond``, in plain Python."""
    if kind == "int":
        return int(value)
    if kind == "bigint":
        return int(value // 1000 if value >= 1_000_000_000_000 else value)
    naive = value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value
    micros = (naive - EPOCH) // dt.timedelta(microseconds=1)
    millis = micros // 1000  # Paimon Timestamp: floored millisecond + nano-of-milli
    return _trunc_div(millis, 1000)


def model_alive(kind: str, value: Any, now_s: int, expire_s: int) -> bool:
    return value is None or now_s <= model_seconds(kind, value) + expire_s


def model_rows(commits: list[list[dict[str, Any]]], kind: str, now_s: int, expire_s: int
               ) -> list[dict[str, Any]]:
    """Deduplicate after dropping expired rows: the last surviving version of each key."""
    table: dict[int, dict[str, Any]] = {}
    for commit in commits:
        for row in commit:
            if model_alive(kind, row["t"], now_s, expire_s):
                table[row["id"]] = row
    return [table[k] for k in sorted(table)]


# ---- time fields ----------------------------------------------------------------------------


def _ts(seconds: int, micros: int = 0, tz: dt.timezone | None = None) -> dt.datetime:
    value = EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)
    return value.replace(tzinfo=tz) if tz else value


# kind, arrow type, a time as that type from epoch seconds
TimeOf = Callable[[int], Any]
CASES: dict[str, tuple[str, pa.DataType, TimeOf]] = {
    "int-seconds": ("int", pa.int32(), lambda s: s),
    "bigint-seconds": ("bigint", pa.int64(), lambda s: s),
    "bigint-millis": ("bigint", pa.int64(), lambda s: s * 1000 + 999),
    "timestamp3": ("timestamp", pa.timestamp("ms"), lambda s: _ts(s, 999_000)),
    "timestamp6": ("timestamp", pa.timestamp("us"), lambda s: _ts(s, 999_999)),
    "timestamp-ltz": ("timestamp", pa.timestamp("us", tz="UTC"),
                      lambda s: _ts(s, 1, dt.timezone.utc)),
}


def _commits(time_of: TimeOf) -> list[list[dict[str, Any]]]:
    """Four commits of overlapping keys: every row's time decides alone."""
    boundary = NOW_S - DAY_S  # now <= t + ttl: kept
    return [
        [{"id": 1, "v": "old", "t": time_of(1000)},  # 1970: gone
         {"id": 2, "v": "recent", "t": time_of(NOW_S - 3600)},
         {"id": 3, "v": "null", "t": None},
         {"id": 4, "v": "boundary", "t": time_of(boundary)},
         {"id": 5, "v": "past", "t": time_of(boundary - 1)}],
        [{"id": 2, "v": "recent-then-1970", "t": time_of(5)},  # dropped: id 2 stays 'recent'
         {"id": 6, "v": "recent-2", "t": time_of(NOW_S - 60)},
         {"id": 7, "v": "1970-again", "t": time_of(100)}],
        [{"id": 3, "v": "null-then-recent", "t": time_of(NOW_S - 10)},
         {"id": 7, "v": "revived", "t": time_of(NOW_S)},
         {"id": 8, "v": "future", "t": time_of(NOW_S + DAY_S)}],
        [{"id": 6, "v": "recent-2-then-past", "t": time_of(boundary - 100)},
         {"id": 9, "v": "null-2", "t": None}],
    ]


def _make_table(warehouse: Path, arrow_type: pa.DataType, commits: list[list[dict[str, Any]]],
                options: dict[str, str] | None = None) -> tuple[Table, pa.Schema]:
    catalog = catalog_for(str(warehouse))
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
                        ("t", arrow_type)])
    catalog.create_database("db", True)
    catalog.create_table(NAME, Schema.from_pyarrow_schema(schema, primary_keys=["id"], options={
        "bucket": "1", "record-level.expire-time": "1 d", "record-level.time-field": "t",
        "write-only": "true", **(options or {})}), False)
    _write(warehouse, schema, commits)
    return open_table(open_storage(str(warehouse)), str(warehouse), NAME), schema


def _write(warehouse: Path, schema: pa.Schema, commits: list[list[dict[str, Any]]]) -> None:
    table = catalog_for(str(warehouse)).get_table(NAME)
    for rows in commits:
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.Table.from_pylist(rows, schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def _read(warehouse: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = read_rows(str(warehouse), NAME).to_pylist()
    return rows


def _files(table: Table) -> dict[str, int]:
    """Live data file name -> level."""
    snapshot = table.snapshots.latest()
    assert snapshot is not None
    return {f.entry.file.file_name: f.entry.file.level
            for files in scan_snapshot(table, snapshot).buckets().values() for f in files.files}


def _same(rows: list[dict[str, Any]], expected: list[dict[str, Any]], kind: str) -> None:
    def norm(row: dict[str, Any]) -> tuple[Any, ...]:
        t = row["t"]
        if kind == "timestamp" and t is not None:
            t = model_seconds(kind, t), t.microsecond
        return row["id"], row["v"], t
    assert [norm(r) for r in rows] == [norm(r) for r in expected]


# ---- end to end -----------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_full_compaction_keeps_exactly_the_models_rows(tmp_path: Path, case: str,
                                                       java_readers_here: list[Any]) -> None:
    kind, arrow_type, time_of = CASES[case]
    commits = _commits(time_of)
    table, _ = _make_table(tmp_path / "wh", arrow_type, commits)
    summary = CompactJob(table, clock=NOW, full=True, use_processes=False).run()
    expected = model_rows(commits, kind, NOW_S, DAY_S)
    assert {r["id"] for r in expected} == {2, 3, 4, 6, 7, 8, 9}  # the model, pinned
    assert next(r for r in expected if r["id"] == 2)["v"] == "recent"
    assert next(r for r in expected if r["id"] == 6)["v"] == "recent-2"
    _same(_read(tmp_path / "wh"), expected, kind)
    assert sum(r.rows_expired for r in summary.results) == 5  # ids 1, 5; 2, 7; 6
    for reader in java_readers_here:
        rows = reader.read_rows(table.path, projection=["id", "v"])
        assert sorted(tuple(json.loads(r)) for r in rows) == [
            (r["id"], r["v"]) for r in expected], reader.release


@pytest.mark.parametrize("options", [{"deletion-vectors.enabled": "true"},
                                     {"merge-engine": "first-row"}], ids=["dv", "first-row"])
def test_lookup_tables_expire_before_merging(tmp_path: Path, options: dict[str, str]) -> None:
    """Deletion-vector and first-row tables (their lookup rewriters) under a full compaction:
    expired rows are dropped before the merge, so first-row keeps the first surviving version
    of a key."""
    kind, arrow_type, time_of = CASES["timestamp6"]
    commits = _commits(time_of)
    table, _ = _make_table(tmp_path / "wh", arrow_type, commits, options)
    CompactJob(table, clock=NOW, full=True, use_processes=False).run()
    if options.get("merge-engine") == "first-row":
        first: dict[int, dict[str, Any]] = {}
        for commit in commits:
            for row in commit:
                if model_alive(kind, row["t"], NOW_S, DAY_S):
                    first.setdefault(row["id"], row)
        expected = [first[k] for k in sorted(first)]
    else:
        expected = model_rows(commits, kind, NOW_S, DAY_S)
    _same(_read(tmp_path / "wh"), expected, kind)
    assert set(_files(table).values()) == {5}


def test_an_expired_level0_row_does_not_supersede_the_row_above(tmp_path: Path) -> None:
    """A deletion-vector table compacting level 0 below its max-level run looks level-0 keys
    up above: an expired level-0 update is dropped before that, so the live row above is not
    marked deleted (Java looks up only the keys its filtered merge sees)."""
    kind, arrow_type, time_of = CASES["bigint-seconds"]
    warehouse = tmp_path / "wh"
    base = [[{"id": i, "v": f"base{i}", "t": time_of(NOW_S - 60)} for i in range(2000)]]
    table, schema = _make_table(warehouse, arrow_type, base, {
        "deletion-vectors.enabled": "true", "num-sorted-run.compaction-trigger": "2",
        "compaction.max-size-amplification-percent": "100000"})
    CompactJob(table, clock=NOW, full=True, use_processes=False).run()
    updates = [[{"id": 1, "v": "expired-update", "t": time_of(1000)},
                {"id": 2, "v": "update", "t": time_of(NOW_S)}],
               [{"id": 3, "v": "update", "t": time_of(NOW_S)}]]
    _write(warehouse, schema, updates)
    plan = CompactJob(table, clock=NOW).plan()
    (task,) = plan.tasks
    assert task.output_level < 5 and task.lookup_files, task.describe()  # the lookup path
    CompactJob(table, clock=NOW, use_processes=False).run()
    expected = model_rows(base + updates, kind, NOW_S, DAY_S)
    assert expected[1]["v"] == "base1" and expected[2]["v"] == "update"
    _same(_read(warehouse), expected, kind)


def test_a_lone_max_level_file_is_rewritten_once_its_min_time_expires(tmp_path: Path) -> None:
    kind, arrow_type, time_of = CASES["bigint-millis"]
    commits = _commits(time_of)
    table, _ = _make_table(tmp_path / "wh", arrow_type, commits)
    CompactJob(table, clock=NOW, full=True, use_processes=False).run()
    compacted = _files(table)
    assert len(compacted) == 1 and set(compacted.values()) == {5}
    # Nothing has expired since: Java's full compaction of a lone max-level run picks nothing.
    assert CompactJob(table, clock=NOW, full=True).plan().tasks == ()
    # A day later the file's min time (the boundary row) has passed its TTL: it is rewritten.
    later_s = NOW_S + 2 * DAY_S
    plan = CompactJob(table, clock=Clock(fixed_ms=later_s * 1000), full=True).plan()
    assert len(plan.tasks) == 1 and plan.tasks[0].file_rewrite
    assert {e.file.file_name for e in plan.tasks[0].inputs} == set(compacted)
    CompactJob(table, clock=Clock(fixed_ms=later_s * 1000), full=True, use_processes=False).run()
    assert set(_files(table)).isdisjoint(compacted)
    expected = model_rows([model_rows(commits, kind, NOW_S, DAY_S)], kind, later_s, DAY_S)
    assert {r["id"] for r in expected} == {8, 9}
    _same(_read(tmp_path / "wh"), expected, kind)


def test_a_large_file_with_expired_rows_is_rewritten_not_upgraded(tmp_path: Path) -> None:
    """Every file counts as large (compaction.small-file-ratio 0), so key-disjoint files are
    upgraded; the one whose min statistic has expired is rewritten instead (Java
    ``MergeTreeCompactTask.upgrade``). pypaimon's level-0 file has no value statistics, so
    it is upgraded whatever it holds, as in Java."""
    kind, arrow_type, time_of = CASES["int-seconds"]
    # two overlapping commits, so that the first compaction rewrites them (with statistics)
    first = [[{"id": i, "v": f"a{i}", "t": time_of(NOW_S - i * 3600)} for i in range(1, 5)]] * 2
    warehouse = tmp_path / "wh"
    table, schema = _make_table(warehouse, arrow_type, first,
                                {"compaction.small-file-ratio": "0"})
    CompactJob(table, clock=NOW, full=True, use_processes=False).run()
    (max_file,) = _files(table)
    second = [[{"id": 100 + i, "v": f"b{i}", "t": time_of(1000 + i)} for i in range(3)]]
    _write(warehouse, schema, second)  # 1970 rows, level 0, no statistics
    (level0,) = set(_files(table)) - {max_file}
    later_s = NOW_S + DAY_S - 3 * 3600 + 1  # ids 3 and 4 (3 and 4 hours old) have expired
    plan = CompactJob(table, clock=Clock(fixed_ms=later_s * 1000), full=True).plan()
    assert len(plan.tasks) == 1 and not plan.tasks[0].file_rewrite
    CompactJob(table, clock=Clock(fixed_ms=later_s * 1000), full=True, use_processes=False).run()
    files = _files(table)
    assert files.get(level0) == 5  # upgraded in place, its 1970 rows untouched
    assert max_file not in files  # rewritten without its expired rows
    rows = _read(warehouse)
    assert [r["id"] for r in rows] == [1, 2, 100, 101, 102]


def test_invalid_settings_are_refused_by_name(tmp_path: Path) -> None:
    table, _ = _make_table(tmp_path / "wh", pa.string(), [], {})
    schema = table.latest_schema()
    with pytest.raises(ConfigError, match="record-level.time-field.*STRING"):
        record_expiry_of(schema, TableOptions.of(schema), NOW_S * 1000)
    for raw, match in (({"record-level.expire-time": "1 d"}, "must be set"),
                       ({"record-level.expire-time": "1 d", "record-level.time-field": "nope"},
                        "no field 'nope'")):
        with pytest.raises(ConfigError, match=match):
            record_expiry_of(schema, TableOptions(raw, has_primary_key=True), NOW_S * 1000)
    assert record_expiry_of(schema, TableOptions({}, has_primary_key=True), 0) is None


# ---- the vectorized filter against the model, at the edges ----------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_keep_mask_matches_the_model_near_the_epoch(case: str) -> None:
    """A clock in 1970 makes Java's truncating division visible: a TIMESTAMP half a second
    before the epoch is second 0, not -1."""
    kind, arrow_type, time_of = CASES[case]
    now_s, expire_s = 10, 10
    values: list[Any] = [None]
    for seconds in (-2, -1, 0, 1, 9, 10, 11, 20, 21):
        values.append(time_of(seconds))
    if kind == "timestamp":
        tz = arrow_type.tz and dt.timezone.utc
        values += [_ts(-1, 500_000, tz), _ts(-1, 1, tz), _ts(-2, 999_999, tz)]
    if kind == "bigint":
        values += [999_999_999_999, 1_000_000_000_000, -5]
    expiry = RecordExpiry(2, "t", kind, expire_s, now_s)
    mask = expiry.keep_mask(pa.array(values, arrow_type)).to_pylist()
    assert mask == [model_alive(kind, v, now_s, expire_s) for v in values]
    assert not all(mask) and any(mask)
