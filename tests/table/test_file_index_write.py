"""New data files carry the file index the table's ``file-index.*`` options ask for: built
over the value row as batches are written, embedded when small, written beside the data file
when large, never left behind by an abort or a compaction that does not commit."""

from __future__ import annotations

import datetime
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pypaimon.schema.schema_change import SchemaChange
from support.file_index_checks import assert_index_matches, index_files, parquet_columns, placed_index
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate, catalog_for
from support.table_history import tree

from paimond.clock import Clock
from paimond.errors import CommitConflictError, UnsupportedError
from paimond.format.file_index import build_file_index, decode_file_index
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import DataField, IntType, VarCharType
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.commit.committer import Committer
from paimond.table.data_files.arrow_io import DataFileWriter, RollingDataFileWriter
from paimond.table.data_files.kv_layout import physical_arrow_schema, to_key_value_batch
from paimond.table.indexes.file_index_writer import index_file_names, next_index_file_name
from paimond.table.options.core import TableOptions
from paimond.table.scan.snapshot_scan import data_file_path, scan_snapshot
from paimond.table.storage.interface import Storage, open_storage

NEW_YEAR = Clock(fixed_ms=int(datetime.datetime(2026, 1, 1).timestamp() * 1000))

STRING = VarCharType(length=2**31 - 1)
TYPES = {"id": IntType(nullable=False), "s": STRING, "k": IntType()}


def _schema(options: dict[str, str], primary_keys: tuple[str, ...] = ()) -> TableSchema:
    fields = tuple(DataField(i, n, t) for i, (n, t) in enumerate(TYPES.items()))
    return TableSchema(0, fields, 2, (), primary_keys, {"bucket": "1", "file.format": "parquet",
                                                        **options})


def _rows(count: int, start: int = 0) -> dict[str, list[Any]]:
    ids = list(range(start, start + count))
    return {"id": ids, "s": [None if i % 7 == 0 else f"s{i % 13}" for i in ids],
            "k": [None if i % 5 == 0 else i % 4 for i in ids]}


def _value_batch(schema: TableSchema, rows: dict[str, list[Any]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(rows, schema=physical_arrow_schema(schema.row_type))


def _writer(storage: Storage, schema: TableSchema, *, key_value: bool,
            **kwargs: Any) -> RollingDataFileWriter:
    return RollingDataFileWriter(storage, "bucket-0", schema, TableOptions.of(schema), level=1,
                                 key_value=key_value, file_source=1, now_millis=lambda: 0,
                                 **kwargs)


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return open_storage(str(tmp_path))


def test_a_small_index_is_embedded_and_built_batch_by_batch(storage: Storage,
                                                            tmp_path: Path) -> None:
    options = {"file-index.bitmap.columns": "k"}
    schema = _schema(options)
    writer = _writer(storage, schema, key_value=False)
    parts = [_rows(20), _rows(17, 20), _rows(13, 37)]
    for rows in parts:
        writer.write(_value_batch(schema, rows))
    (meta,) = writer.close()
    assert meta.extra_files == () and meta.embedded_index is not None
    assert sorted(p.name for p in (tmp_path / "bucket-0").iterdir()) == [meta.file_name]
    everything = {c: [v for rows in parts for v in rows[c]] for c in TYPES}
    whole = build_file_index({c: (TYPES[c], everything[c]) for c in TYPES},
                             TableOptions(options).file_index_columns)
    assert meta.embedded_index == whole  # batch by batch builds what one pass builds
    container = decode_file_index(meta.embedded_index)
    assert list(container) == ["k"]
    assert assert_index_matches(container, everything, TYPES) == 1


def test_a_large_index_goes_beside_the_data_file(storage: Storage) -> None:
    """A primary-key file indexes its value columns (``id`` is the value column, not
    ``_KEY_id``), every row, retractions included, in file order."""
    options = {"file-index.bloom-filter.columns": "s", "file-index.bloom-filter.s.items": "3000",
               "file-index.bitmap.columns": "id,k"}
    schema = _schema(options, primary_keys=("id",))
    rows = _rows(60)
    kinds = pa.array([i % 4 for i in range(60)], pa.int8())
    batch = to_key_value_batch(_value_batch(schema, rows), schema, pa.array(range(60)), kinds)
    writer = _writer(storage, schema, key_value=True)
    writer.write(batch)
    (meta,) = writer.close()
    assert meta.embedded_index is None
    assert meta.extra_files == (f"{meta.file_name}.index",)
    path = storage.join("bucket-0", meta.file_name)
    container = decode_file_index(storage.read_bytes(f"{path}.index"))
    assert sorted(container) == ["id", "k", "s"]
    assert assert_index_matches(container, parquet_columns(path, ["id", "s", "k"]), TYPES) == 3


def test_no_index_options_write_no_index(storage: Storage, tmp_path: Path) -> None:
    schema = _schema({"file-index.in-manifest-threshold": "1 b"})
    writer = _writer(storage, schema, key_value=False)
    writer.write(_value_batch(schema, _rows(30)))
    (meta,) = writer.close()
    assert meta.extra_files == () and meta.embedded_index is None
    assert [p.name for p in (tmp_path / "bucket-0").iterdir()] == [meta.file_name]


def test_abort_leaves_no_index_file(storage: Storage, tmp_path: Path) -> None:
    options = {"file-index.bloom-filter.columns": "s", "target-file-size": "1 kb"}
    schema = _schema(options)
    writer = _writer(storage, schema, key_value=False)
    for start in range(0, 400, 50):
        writer.write(_value_batch(schema, _rows(50, start)))
    metas = writer.close()
    assert len(metas) > 1 and all(index_files(m) for m in metas)
    assert len(list((tmp_path / "bucket-0").iterdir())) == 2 * len(metas)
    writer.abort()
    assert list((tmp_path / "bucket-0").iterdir()) == []
    single = DataFileWriter(storage, storage.join("bucket-0", "one.parquet"), schema,
                            TableOptions.of(schema), level=0, key_value=False, file_source=0,
                            now_millis=lambda: 0)
    single.write(_value_batch(schema, _rows(50)))
    single.abort()
    assert list((tmp_path / "bucket-0").iterdir()) == []
    bad = _schema({"file-index.bitmap.columns": "nope"})
    with pytest.raises(UnsupportedError, match="nope does not exist"):
        _writer(storage, bad, key_value=False).write(_value_batch(bad, _rows(3)))
    assert list((tmp_path / "bucket-0").iterdir()) == []


class _PublishFails:
    """A Storage whose data files fail to publish (``close`` raises)."""

    def __init__(self, inner: Storage) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def open_output(self, path: str) -> Any:
        output = self._inner.open_output(path)

        class Failing:
            def __getattr__(self, name: str) -> Any:
                return getattr(output, name)

            def close(self) -> None:
                raise OSError("disk full")
        return Failing()


def test_a_data_file_that_fails_to_publish_takes_its_index_file_along(
        storage: Storage, tmp_path: Path) -> None:
    schema = _schema({"file-index.bloom-filter.columns": "s"})
    writer = _writer(_PublishFails(storage), schema, key_value=False)  # type: ignore[arg-type]
    writer.write(_value_batch(schema, _rows(50)))
    with pytest.raises(OSError, match="disk full"):
        writer.close()
    assert list((tmp_path / "bucket-0").iterdir()) == []


def test_index_file_names_follow_java() -> None:
    name = "data-1f2e-0.parquet"
    names = index_file_names(name)
    assert [next(names) for _ in range(3)] == [f"{name}.index", "data-1f2e-0.parquet-1.index",
                                               "data-1f2e-0.parquet-2.index"]
    assert next(index_file_names(name, "data-1f2e-0.parquet-9.index")) == \
        "data-1f2e-0.parquet-10.index"
    assert next_index_file_name("x-a.orc.index") == "x-a.orc-1.index"


INDEX_OPTIONS = {"file-index.bitmap.columns": "v", "file-index.bloom-filter.columns": "id",
                 "file-index.bloom-filter.id.items": "2000"}


@pytest.fixture(scope="module")
def indexed_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """pypaimon's deduplicate table (no index), then index options set on it."""
    warehouse = tmp_path_factory.mktemp("indexed") / "wh"
    spec = build_pk_deduplicate(str(warehouse))
    catalog_for(str(warehouse)).alter_table(
        spec.name, [SchemaChange.set_option(k, v) for k, v in INDEX_OPTIONS.items()], False)
    return warehouse, spec.name


def test_compaction_output_carries_the_index(indexed_table: tuple[Path, str],
                                             tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    shutil.copytree(indexed_table[0], warehouse)
    name = indexed_table[1]
    before = read_rows(warehouse, name)
    table = open_table(open_storage(warehouse), warehouse, name)
    summary = CompactJob(table, full=True, parallelism=2, use_processes=False,
                         clock=NEW_YEAR).run()
    assert summary.snapshot is not None and summary.files_out > 0
    assert read_rows(warehouse, name).equals(before)
    schema = table.latest_schema()
    types = {f.name: f.type for f in schema.fields}
    checked = 0
    for live in scan_snapshot(table, summary.snapshot).files:
        container = placed_index(table, live)
        assert container is not None and index_files(live.meta), live.meta.file_name
        path = data_file_path(table, schema, live)
        checked += assert_index_matches(container, parquet_columns(path, ["id", "v"]), types)
    assert checked == 2 * summary.files_out


def test_uncommitted_compaction_leaves_no_index_file(indexed_table: tuple[Path, str],
                                                     tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    warehouse = str(tmp_path / "wh")
    shutil.copytree(indexed_table[0], warehouse)
    before = tree(warehouse)

    def lose(self: Committer, changes: Any) -> Any:
        raise CommitConflictError("t", "RequireFilesLive", "inputs live", "a concurrent compaction won")

    monkeypatch.setattr(Committer, "commit", lose)
    table = open_table(open_storage(warehouse), warehouse, indexed_table[1])
    job = CompactJob(table, full=True, parallelism=2, use_processes=False,
                     max_attempts=2, clock=NEW_YEAR)
    with pytest.raises(CommitConflictError):
        job.run()
    assert tree(warehouse) == before
