"""Partition expiration on pypaimon-written tables: an independent model (strptime on the
partition values, the files' creation times as pypaimon reports them) decides which
partitions expire; after the job pypaimon (and Java) read exactly the other partitions' rows,
the new snapshot is an OVERWRITE whose delta holds a DELETE entry for every live file of the
dropped partitions, earlier snapshots read as before, dry runs change nothing, max-num and
batch-size are honoured and a concurrent writer's commit makes the job re-plan."""

from __future__ import annotations

import datetime
import os
import shutil
from collections.abc import Sequence, Set
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pypaimon.schema.schema_change import SchemaChange
from support.daily_partitions import DAYS, SCHEMA, commit_day, create_partitioned, daily_table
from support.java_reader import canonical_rows, multiset_diff
from support.pypaimon_oracle import index_entries, live_files, read_rows
from support.pypaimon_tables import build_append_deletion_vectors, catalog_for, sort_rows
from support.table_history import tree

from paimond.clock import Clock
from paimond.errors import ConfigError, RefusedError, UnsupportedError
from paimond.format.meta.manifest import FILE_KIND_DELETE
from paimond.maintenance.expire import partitions as partitions_module
from paimond.maintenance.expire.partitions import (
    PartitionExpireJob,
    PartitionExpireResult,
)
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.maintenance.tags.job import create_tag
from paimond.table.branches import create_branch
from paimond.table.catalog import Table, open_table
from paimond.table.catalogs.catalog_storage import CatalogStorage
from paimond.table.catalogs.hive import HiveCatalog, HiveCatalogConfig, HiveTable
from paimond.table.partition_time import PartitionTimeExtractor, compile_java_format
from paimond.table.scan.snapshot_scan import read_manifest, read_manifest_list
from paimond.table.storage.interface import open_storage

NOW_MS = round(datetime.datetime(2024, 1, 10, 12, 0).timestamp() * 1000)  # local 2024-01-10 12:00
CLOCK = Clock(fixed_ms=NOW_MS)
HOURLY = pa.schema([pa.field("dt", pa.string()), pa.field("hour", pa.string()),
                    pa.field("id", pa.int32())])


# ---- building tables ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def daily(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    warehouse = tmp_path_factory.mktemp("partitions") / "wh"
    return warehouse, daily_table(str(warehouse))


@pytest.fixture
def copy(daily: tuple[Path, list[dict[str, Any]]], tmp_path: Path
         ) -> tuple[str, list[dict[str, Any]]]:
    shutil.copytree(daily[0], tmp_path / "wh")
    return str(tmp_path / "wh"), daily[1]


def _open(warehouse: str, name: str) -> Table:
    storage = open_storage(warehouse)
    return open_table(storage, storage.root, name)


# ---- the model ---------------------------------------------------------------------------


def _model_daily_expired(days: Sequence[str], now_ms: int, expiration: datetime.timedelta
                         ) -> list[str]:
    """Days strictly before local now - expiration; values that are no date never expire."""
    threshold = datetime.datetime.fromtimestamp(now_ms / 1000) - expiration
    out = []
    for dt in days:
        try:
            moment = datetime.datetime.strptime(dt, "%Y%m%d")
        except ValueError:
            continue
        if moment < threshold:
            out.append(dt)
    return sorted(out)


def _expected(rows: list[dict[str, Any]], dropped: Set[tuple[str, ...]],
              keys: Sequence[str], schema: pa.Schema) -> pa.Table:
    kept = [r for r in rows if tuple(r[k] for k in keys) not in dropped]
    return sort_rows(pa.Table.from_pylist(kept, schema=schema), schema.names)


def _read(warehouse: str, name: str, snapshot_id: int | None = None) -> pa.Table:
    rows = read_rows(warehouse, name, snapshot_id=snapshot_id)
    return sort_rows(rows, rows.column_names)


def _assert_overwrite_drops(warehouse: str, name: str, dropped: Set[tuple[str, ...]]) -> None:
    """The newest snapshot: OVERWRITE, a delta of DELETE entries for exactly the files the
    previous snapshot held in the dropped partitions (pypaimon's view), nothing else."""
    table = _open(warehouse, name)
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "OVERWRITE"
    where = table.snapshots.path(latest.id)
    delta = [e for m in read_manifest_list(table, latest.delta_manifest_list, where)
             for e in read_manifest(table, m, where)]
    assert {e.kind for e in delta} == {FILE_KIND_DELETE}
    before = live_files(warehouse, name, latest.id - 1)
    expected = {(f["file_name"], f["bucket"]) for f in before
                if tuple(f["partition_values"]) in dropped}
    assert sorted((e.file.file_name, e.bucket) for e in delta) == sorted(expected)
    assert latest.delta_record_count == -sum(f["row_count"] for f in before
                                              if tuple(f["partition_values"]) in dropped)


# ---- values-time -------------------------------------------------------------------------


def test_daily_partitions_expire_as_the_model_says(
        copy: tuple[str, list[dict[str, Any]]], java_readers_here: list[Any]) -> None:
    warehouse, rows = copy
    name = "db.daily"
    before_id = _open(warehouse, name).snapshots.latest_id()
    before = _read(warehouse, name)
    expired = _model_daily_expired(DAYS, NOW_MS, datetime.timedelta(days=3))
    assert expired == [f"202401{d:02d}" for d in range(1, 8)]  # the model is not vacuous

    result = PartitionExpireJob(_open(warehouse, name), clock=CLOCK).run()

    assert [p.path for p in result.expired] == [f"dt={d}" for d in expired]
    assert any("dt=not-a-date" in w for w in result.warnings)
    dropped = {(d,) for d in expired}
    assert _read(warehouse, name).equals(_expected(rows, dropped, ["dt"], SCHEMA))
    _assert_overwrite_drops(warehouse, name, dropped)
    assert _read(warehouse, name, before_id).equals(before)  # time travel: as before
    for reader in java_readers_here:
        java = reader.read(str(Path(warehouse) / "db.db" / "daily"))
        assert not multiset_diff(java.rows, canonical_rows(
            _expected(rows, dropped, ["dt"], SCHEMA))), reader.release
    # nothing left to do: a second run commits nothing
    again = PartitionExpireJob(_open(warehouse, name), clock=CLOCK).run()
    assert again.expired == [] and again.snapshots == []


def test_files_stay_until_snapshot_expiration_retires_them(
        copy: tuple[str, list[dict[str, Any]]]) -> None:
    warehouse, rows = copy
    name = "db.daily"
    paths = {f["path"] for f in live_files(warehouse, name, 2)
             if f["partition_values"][0] in {f"202401{d:02d}" for d in range(1, 8)}}
    assert len(paths) == 14 and all(os.path.exists(p) for p in paths)
    PartitionExpireJob(_open(warehouse, name), clock=CLOCK).run()
    assert all(os.path.exists(p) for p in paths)  # snapshots 1 and 2 still hold them
    ExpireJob(_open(warehouse, name), clock=Clock(fixed_ms=4_102_444_800_000),
              settings=ExpireSettings(retain_min=1, time_retained_ms=0)).run()
    assert not any(os.path.exists(p) for p in paths)
    dropped = {(f"202401{d:02d}",) for d in range(1, 8)}
    assert _read(warehouse, name).equals(_expected(rows, dropped, ["dt"], SCHEMA))


def test_dry_run_changes_no_file(copy: tuple[str, list[dict[str, Any]]]) -> None:
    warehouse, _ = copy
    before = tree(warehouse)
    result = PartitionExpireJob(_open(warehouse, "db.daily"), clock=CLOCK, dry_run=True).run()
    assert len(result.expired) == 7 and result.snapshots == []
    assert "would be dropped (dry run)" in result.describe()
    assert tree(warehouse) == before


def test_max_num_takes_the_first_partitions_in_java_order(
        copy: tuple[str, list[dict[str, Any]]]) -> None:
    warehouse, rows = copy
    result = PartitionExpireJob(_open(warehouse, "db.daily"), clock=CLOCK, max_num=2).run()
    assert [p.path for p in result.expired] == ["dt=20240101", "dt=20240102"]
    assert result.over_limit == 5 and len(result.snapshots) == 1
    dropped = {("20240101",), ("20240102",)}
    assert _read(warehouse, "db.daily").equals(_expected(rows, dropped, ["dt"], SCHEMA))


def test_older_than_overrides_the_option(copy: tuple[str, list[dict[str, Any]]]) -> None:
    warehouse, rows = copy
    job = JOBS["expire_partitions"]
    report = job.run(_open(warehouse, "db.daily"), job.settings(older_than_ms=86_400_000),
                     JobContext(CLOCK))
    expired = _model_daily_expired(DAYS, NOW_MS, datetime.timedelta(days=1))
    assert isinstance(report.result, PartitionExpireResult)
    assert [p.path for p in report.result.expired] == [f"dt={d}" for d in expired]
    assert _read(warehouse, "db.daily").equals(
        _expected(rows, {(d,) for d in expired}, ["dt"], SCHEMA))


def test_batch_size_commits_one_overwrite_per_batch(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    rows = daily_table(warehouse, "db.batched", **{"partition.expiration-batch-size": "4"})
    start = _open(warehouse, "db.batched").snapshots.latest_id()
    assert start is not None
    result = PartitionExpireJob(_open(warehouse, "db.batched"), clock=CLOCK).run()
    assert result.snapshots == [start + 1, start + 2]
    table = _open(warehouse, "db.batched")
    assert [table.snapshots.load(i).commit_kind for i in result.snapshots] == ["OVERWRITE"] * 2
    dropped = {(f"202401{d:02d}",) for d in range(1, 8)}
    assert _read(warehouse, "db.batched").equals(_expected(rows, dropped, ["dt"], SCHEMA))
    assert len(_read(warehouse, "db.batched", start + 1)) == len(rows) - 2 * 4  # 4 days, 2 rows


def test_hour_partitions_with_a_pattern(tmp_path: Path) -> None:
    warehouse, name = str(tmp_path / "wh"), "db.hourly"
    table = create_partitioned(warehouse, name, HOURLY, ["dt", "hour"], {
        "partition.expiration-time": "12 h", "partition.timestamp-pattern": "$dt $hour:00:00",
        "partition.timestamp-formatter": "yyyyMMdd HH:mm:ss"})
    # 20240110 00: exactly now - 12 h, which is not strictly before it: kept
    parts = [("20240109", f"{h:02d}") for h in range(0, 24, 3)] + [("20240110", "00"),
                                                                   ("20240110", "01")]
    rows = [{"dt": dt, "hour": hour, "id": i} for i, (dt, hour) in enumerate(parts)]
    commit_day(table, HOURLY, rows)
    threshold = datetime.datetime.fromtimestamp(NOW_MS / 1000) - datetime.timedelta(hours=12)
    expired = sorted(p for p in parts
                     if datetime.datetime.strptime(f"{p[0]} {p[1]}", "%Y%m%d %H") < threshold)
    assert 0 < len(expired) < len(parts)

    result = PartitionExpireJob(_open(warehouse, name), clock=CLOCK).run()

    assert [p.path for p in result.expired] == [f"dt={d}/hour={h}" for d, h in expired]
    assert _read(warehouse, name).equals(_expected(rows, set(expired), ["dt", "hour"], HOURLY))
    _assert_overwrite_drops(warehouse, name, set(expired))


# ---- update-time -------------------------------------------------------------------------


def test_update_time_uses_the_newest_file_of_each_partition(tmp_path: Path) -> None:
    warehouse, name = str(tmp_path / "wh"), "db.updates"
    table = create_partitioned(warehouse, name, SCHEMA, ["dt"], {
        "partition.expiration-time": "1 d", "partition.expiration-strategy": "update-time"})
    old = [{"dt": dt, "id": i, "v": "old"} for i, dt in enumerate(["a", "b", "c"])]
    commit_day(table, SCHEMA, old)
    first = live_files(warehouse, name, 1)
    new = [{"dt": "c", "id": 10, "v": "new"}, {"dt": "d", "id": 11, "v": "new"}]
    commit_day(table, SCHEMA, new)
    # the model: each partition's newest creation time, as pypaimon reads it
    newest: dict[str, int] = {}
    for f in live_files(warehouse, name, 2):
        newest[f["partition_values"][0]] = max(newest.get(f["partition_values"][0], 0),
                                               f["creation_time"])
    cut = max(f["creation_time"] for f in first)  # local millis of the first commit
    now_local_ms = cut + 1 + 86_400_000  # threshold = just after the first commit
    now_ms = round((datetime.datetime(1970, 1, 1)
                    + datetime.timedelta(milliseconds=now_local_ms)).timestamp() * 1000)
    expired = sorted(p for p, t in newest.items() if t < cut + 1)
    assert expired == ["a", "b"]  # c has a newer file from the second commit

    result = PartitionExpireJob(_open(warehouse, name), clock=Clock(fixed_ms=now_ms)).run()

    assert [p.path for p in result.expired] == [f"dt={p}" for p in expired]
    dropped = {(p,) for p in expired}
    assert _read(warehouse, name).equals(_expected(old + new, dropped, ["dt"], SCHEMA))
    _assert_overwrite_drops(warehouse, name, dropped)


def test_index_entries_of_dropped_partitions_go_with_them(tmp_path: Path) -> None:
    """Java's overwrite removes the index manifest entries of the dropped partitions."""
    warehouse = str(tmp_path / "wh")
    spec = build_append_deletion_vectors(warehouse)
    catalog_for(warehouse).alter_table(spec.name, [
        SchemaChange.set_option("partition.expiration-strategy", "update-time")], False)
    table = _open(warehouse, spec.name)
    before_id = table.snapshots.latest_id()
    assert before_id is not None
    before = index_entries(warehouse, spec.name, before_id)
    assert {e["partition_values"] for e in before} == {("a",), ("b",)}

    result = PartitionExpireJob(table, clock=Clock(fixed_ms=4_102_444_800_000),  # 2100
                                older_than_ms=1, max_num=1).run()

    assert [p.path for p in result.expired] == ["dt=a"] and result.over_limit == 1
    after = index_entries(warehouse, spec.name, before_id + 1)
    assert after == [e for e in before if e["partition_values"] != ("a",)]
    _assert_overwrite_drops(warehouse, spec.name, {("a",)})
    expected = spec.expected_rows.filter(pc.not_equal(spec.expected_rows["dt"], "a"))
    assert read_rows(warehouse, spec.name).equals(expected)


# ---- concurrency, nothing to do, bad options ----------------------------------------------


class _WriterInterferes(PartitionExpireJob):
    """Before its first commit, a pypaimon writer commits to an expired partition."""

    interfered = False
    warehouse = ""

    def _commit(self, *args: Any, **kwargs: Any) -> Any:
        if not self.interfered:
            type(self).interfered = True
            table = catalog_for(self.warehouse).get_table("db.daily")
            commit_day(table, SCHEMA, [{"dt": "20240101", "id": 999, "v": "late"},
                                    {"dt": "20240109", "id": 998, "v": "late"}])
        return super()._commit(*args, **kwargs)


def test_a_concurrent_commit_makes_the_job_re_plan(
        copy: tuple[str, list[dict[str, Any]]]) -> None:
    warehouse, rows = copy
    _WriterInterferes.warehouse, _WriterInterferes.interfered = warehouse, False
    result = _WriterInterferes(_open(warehouse, "db.daily"), clock=CLOCK).run()
    assert result.attempts == 2
    late = [{"dt": "20240101", "id": 999, "v": "late"}, {"dt": "20240109", "id": 998, "v": "late"}]
    dropped = {(f"202401{d:02d}",) for d in range(1, 8)}
    # the late file in the expired partition goes too (Java overwrites what is there)
    assert _read(warehouse, "db.daily").equals(_expected(rows + late, dropped, ["dt"], SCHEMA))
    _assert_overwrite_drops(warehouse, "db.daily", dropped)


def test_nothing_to_do_is_said_clearly(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    plain = create_partitioned(warehouse, "db.plain", SCHEMA, [], {"partition.expiration-time": "1 d"})
    commit_day(plain, SCHEMA, [{"dt": "20240101", "id": 1, "v": "x"}])
    no_option = create_partitioned(warehouse, "db.no_option", SCHEMA, ["dt"], {})
    commit_day(no_option, SCHEMA, [{"dt": "20240101", "id": 1, "v": "x"}])
    before = tree(warehouse)
    unpartitioned = PartitionExpireJob(_open(warehouse, "db.plain"), clock=CLOCK).run()
    assert "not partitioned" in unpartitioned.describe()
    unset = PartitionExpireJob(_open(warehouse, "db.no_option"), clock=CLOCK).run()
    assert "partition.expiration-time is not set" in unset.describe()
    assert tree(warehouse) == before
    # --older-than alone is enough: the default parser reads no yyyyMMdd, so nothing expires
    overridden = PartitionExpireJob(_open(warehouse, "db.no_option"), clock=CLOCK,
                                    older_than_ms=1).run()
    assert overridden.expired == [] and overridden.warnings


def test_an_unsupported_formatter_is_refused_naming_the_option(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    table = create_partitioned(warehouse, "db.bad", SCHEMA, ["dt"], {
        "partition.expiration-time": "1 d", "partition.timestamp-formatter": "dd MMM yyyy"})
    commit_day(table, SCHEMA, [{"dt": "01 Jan 2024", "id": 1, "v": "x"}])
    with pytest.raises(ConfigError, match="partition.timestamp-formatter"):
        PartitionExpireJob(_open(warehouse, "db.bad"), clock=CLOCK).run()


@pytest.mark.parametrize(("option", "error", "reason"), [
    ("metastore.partitioned-table", UnsupportedError, "metastore.partitioned-table"),
    # chain tables expire across the branches these name (tests/interop/test_java_chain_table)
    ("chain-table.enabled", RefusedError, "has no scan.fallback-snapshot-branch")])
def test_tables_java_expires_otherwise_are_refused(option: str, error: type[Exception],
                                                   reason: str, tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    table = create_partitioned(warehouse, "db.other", SCHEMA, ["dt"],
                               {"partition.expiration-time": "1 d", option: "true"})
    commit_day(table, SCHEMA, [{"dt": "2024-01-01", "id": 1, "v": "x"}])
    before = tree(warehouse)
    with pytest.raises(error, match=reason):
        PartitionExpireJob(_open(warehouse, "db.other"), clock=CLOCK).run()
    assert tree(warehouse) == before


def test_result_describes_the_drop(copy: tuple[str, list[dict[str, Any]]]) -> None:
    warehouse, _ = copy
    result: PartitionExpireResult = PartitionExpireJob(_open(warehouse, "db.daily"),
                                                       clock=CLOCK).run()
    text = result.describe()
    assert "7 partition(s) dropped in OVERWRITE snapshot(s)" in text
    assert "dt=20240101: 2 files, 2 rows; partition time 2024-01-01 00:00:00" in text


# ---- the time extractor (Java PartitionTimeExtractor's cases) -----------------------------


@pytest.mark.parametrize(("pattern", "formatter", "keys", "values", "expected"), [
    (None, None, ["dt"], ["2023-01-01"], datetime.datetime(2023, 1, 1)),
    (None, None, ["dt"], ["2023-01-01 01:02:03"], datetime.datetime(2023, 1, 1, 1, 2, 3)),
    (None, None, ["dt"], ["2023-1-1 1:2:3.5"], datetime.datetime(2023, 1, 1, 1, 2, 3, 500000)),
    (None, None, ["dt"], ["2023-13-01"], datetime.datetime(2024, 1, 1)),  # LENIENT
    ("$year-$month-$day 00:00:00", None, ["year", "month", "day"], ["2023", "01", "02"],
     datetime.datetime(2023, 1, 2)),
    ("$dt $hour:00:00", None, ["dt", "hour"], ["2023-01-01", "1"],
     datetime.datetime(2023, 1, 1, 1)),
    ("$dt1", None, ["dt", "dt1"], ["2023-01-01", "2024-02-02"], datetime.datetime(2024, 2, 2)),
    (None, "yyyyMMdd", ["dt"], ["20230102"], datetime.datetime(2023, 1, 2)),
    (None, "yyyyMMdd", ["dt"], ["20230230"], datetime.datetime(2023, 2, 28)),  # SMART
    ("$dt $hour", "yyyyMMdd HH", ["dt", "hour"], ["20230102", "05"],
     datetime.datetime(2023, 1, 2, 5)),
    (None, "yyyy-MM-dd'T'HH:mm", ["dt"], ["2023-01-02T05:06"], datetime.datetime(2023, 1, 2, 5, 6)),
])
def test_extractor(pattern: str | None, formatter: str | None, keys: list[str],
                   values: list[str], expected: datetime.datetime) -> None:
    compiled = None if formatter is None else compile_java_format(formatter)
    assert PartitionTimeExtractor(pattern, compiled).extract(keys, values) == expected


@pytest.mark.parametrize(("formatter", "value"), [
    (None, "20230101"), (None, "2023-01-01 10:00"), (None, "2023-01-01T10:00:00"),
    ("yyyyMMdd", "2023011"), ("yyyyMMdd", "20231301"), ("yyyyMMdd HH", "20230101 25"),
])
def test_extractor_refuses_what_java_refuses(formatter: str | None, value: str) -> None:
    compiled = None if formatter is None else compile_java_format(formatter)
    with pytest.raises(ValueError):
        PartitionTimeExtractor(None, compiled).extract(["dt"], [value])


class _RecordingMetastore(HiveCatalog):
    """A Hive catalog that records the partitions it is asked to drop (the metastore's own
    answers: tests/interop/test_java_hive_catalog.py)."""

    def __init__(self, warehouse: str) -> None:
        super().__init__(HiveCatalogConfig.of({"uri": "thrift://127.0.0.1:9"}))
        self.dropped: list[tuple[str, str, list[list[str]]]] = []
        self._tables = [HiveTable("db", "hms", f"{warehouse}/db.db/hms")]

    def tables(self) -> list[HiveTable]:
        return self._tables

    def table(self, database: str, name: str) -> HiveTable:
        return self._tables[0]

    def drop_partitions(self, database: str, name: str,
                        partitions: Sequence[Sequence[str]]) -> int:
        self.dropped.append((database, name, [list(p) for p in partitions]))
        return len(partitions)


def test_a_hive_catalog_drops_expired_partitions_from_the_metastore_first(
        tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    java_table = create_partitioned(warehouse, "db.hms", SCHEMA, ["dt"], {
        "partition.expiration-time": "1 d", "metastore.partitioned-table": "true"})
    commit_day(java_table, SCHEMA, [{"dt": "2024-01-01", "id": 1, "v": "x"}])
    metastore = _RecordingMetastore(warehouse)
    storage = CatalogStorage(open_storage(warehouse), metastore)
    table = open_table(storage, warehouse, "db.hms")
    create_tag(table, clock=CLOCK, name="first", snapshot_id=1)
    create_branch(table, "b", tag="first")  # the branch holds 2024-01-01 on
    commit_day(java_table, SCHEMA, [{"dt": "2024-01-02", "id": 2, "v": "y"}])

    result = PartitionExpireJob(table, clock=CLOCK).run()
    assert sorted(p.path for p in result.expired) == ["dt=2024-01-01", "dt=2024-01-02"]
    # both leave the table; the metastore loses only the one no other branch has
    assert metastore.dropped == [("db", "hms", [["2024-01-02"], ["2024-01-02.done"]])]
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "OVERWRITE"
    assert live_files(warehouse, "db.hms", latest.id) == []


def test_a_commit_lost_after_the_metastores_drop_is_redone_by_the_next_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse = str(tmp_path / "wh")
    java_table = create_partitioned(warehouse, "db.hms", SCHEMA, ["dt"], {
        "partition.expiration-time": "1 d", "metastore.partitioned-table": "true"})
    commit_day(java_table, SCHEMA, [{"dt": "2024-01-01", "id": 1, "v": "x"}])
    metastore = _RecordingMetastore(warehouse)
    table = open_table(CatalogStorage(open_storage(warehouse), metastore), warehouse, "db.hms")

    def lost(*args: Any, **kwargs: Any) -> Any:
        raise OSError("the store went away after the metastore's drop")

    with monkeypatch.context() as patched:
        patched.setattr(partitions_module, "drop_partitions", lost)
        with pytest.raises(OSError, match="went away"):
            PartitionExpireJob(table, clock=CLOCK).run()
    assert table.snapshots.latest_id() == 1  # nothing committed; the metastore dropped it
    assert len(metastore.dropped) == 1

    result = PartitionExpireJob(table, clock=CLOCK).run()
    assert [p.path for p in result.expired] == ["dt=2024-01-01"]
    assert metastore.dropped[1] == metastore.dropped[0]  # asked again, as Java would
    latest = table.snapshots.latest()
    assert latest is not None and latest.commit_kind == "OVERWRITE"
