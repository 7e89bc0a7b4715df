"""pypaimon 2.1.0 as the oracle for manifest codecs: tables it writes, and its readers'
results turned into paimond's dataclasses so that the two compare with ``==``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
from pypaimon import CatalogFactory, Schema
from pypaimon.manifest.index_manifest_file import IndexManifestFile
from pypaimon.manifest.manifest_file_manager import ManifestFileManager
from pypaimon.manifest.manifest_list_manager import ManifestListManager
from pypaimon.table.row.generic_row import GenericRowSerializer

from paimond.format.meta.index_manifest import (
    DeletionVectorMeta,
    GlobalIndexMeta,
    IndexFileMeta,
    IndexManifestEntry,
)
from paimond.format.meta.manifest import DataFileMeta, ManifestEntry, SimpleStats
from paimond.format.meta.manifest_list import ManifestFileMeta

PK_SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False),
                       pa.field("dt", pa.string(), nullable=False),
                       ("v", pa.string()), ("k", pa.string())])
APPEND_SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), ("dt", pa.string()),
                           ("v", pa.string())])


def _commit_arrow(table: Any, data: pa.Table) -> None:
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    write.write_arrow(data)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def write_tables(warehouse: Path) -> dict[str, Any]:
    """Tables covering manifests, manifest lists and both kinds of index manifest."""
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("db", True)

    def create(name: str, schema: pa.Schema, **kw: Any) -> Any:
        catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(schema, **kw), True)
        return catalog.get_table(f"db.{name}")

    pk = create("pk", PK_SCHEMA, partition_keys=["dt"], primary_keys=["id", "dt"],
                options={"bucket": "2", "rowkind.field": "k"})
    for i in range(3):
        _commit_arrow(pk, pa.table({
            "id": [1, 2, 3, 10 + i, 100 + i],
            "dt": ["2024-01-01", "2024-01-02", "2024-01-01", "2024-01-02", "a-long-partition"],
            "v": ["a", None, "c", "d" * 20, None],
            "k": ["+I", "+U", "-D" if i else "+I", "+I", "-U" if i == 2 else "+I"],
        }, schema=PK_SCHEMA))

    append = create("append", APPEND_SCHEMA, partition_keys=["dt"])
    for i in range(2):
        _commit_arrow(append, pa.table({"id": [i, i + 1], "dt": ["x", None], "v": ["p", "q"]},
                                       schema=APPEND_SCHEMA))

    # Deletes on a data-evolution table are written as deletion-vector index files.
    dv = create("dv", APPEND_SCHEMA, partition_keys=["dt"], options={
        "row-tracking.enabled": "true", "data-evolution.enabled": "true",
        "deletion-vectors.enabled": "true"})
    for _ in range(2):
        _commit_arrow(dv, pa.table({"id": [1, 2, 3], "dt": ["a", "a", "b"],
                                    "v": ["x", "y", "z"]}, schema=APPEND_SCHEMA))
    for row_ids in ([0, 2, 4], [1]):
        wb = dv.new_batch_write_builder()
        commit = wb.new_commit()
        commit.commit(wb.new_update().delete_by_row_id(row_ids))
        commit.close()

    # Dynamic bucket mode keeps a HASH index per bucket.
    dyn_schema = pa.schema([pa.field("id", pa.int32(), nullable=False), ("v", pa.string())])
    dyn = create("dyn", dyn_schema, primary_keys=["id"], options={"bucket": "-1"})
    _commit_arrow(dyn, pa.table({"id": [1, 2, 3], "v": ["x", "y", "z"]}, schema=dyn_schema))

    tables = {"pk": pk, "append": append, "dv": dv, "dyn": dyn}
    for codec in ("null", "deflate", "snappy"):
        t = create(f"codec_{codec}", APPEND_SCHEMA, options={"manifest.compression": codec})
        _commit_arrow(t, pa.table({"id": [1], "dt": ["x"], "v": ["y"]}, schema=APPEND_SCHEMA))
        tables[f"codec_{codec}"] = t
    return tables


def manifest_dir(table: Any) -> Path:
    return Path(table.table_path) / "manifest"


def file_kind(name: str) -> str:
    if name.startswith("index-manifest-"):
        return "index"
    if name.startswith("manifest-list-"):
        return "list"
    return "manifest"


# ------------------------------------------------------------------ pypaimon -> paimond


def _row(row: Any) -> bytes:
    return GenericRowSerializer.to_bytes(row)


def _opt_tuple(values: Any) -> tuple[Any, ...] | None:
    return None if values is None else tuple(values)


def _stats(s: Any) -> SimpleStats:
    return SimpleStats(_row(s.min_values), _row(s.max_values), _opt_tuple(s.null_counts))


def _entry(e: Any) -> ManifestEntry:
    f = e.file
    return ManifestEntry(e.kind, _row(e.partition), e.bucket, e.total_buckets, DataFileMeta(
        f.file_name, f.file_size, f.row_count, _row(f.min_key), _row(f.max_key),
        _stats(f.key_stats), _stats(f.value_stats), f.min_sequence_number,
        f.max_sequence_number, f.schema_id, f.level, tuple(f.extra_files),
        None if f.creation_time is None else f.creation_time.get_millisecond(),
        f.delete_row_count, f.embedded_index, f.file_source, _opt_tuple(f.value_stats_cols),
        f.external_path, f.first_row_id, _opt_tuple(f.write_cols),
        _opt_tuple(f.write_cols_sequences)))


def _meta(m: Any) -> ManifestFileMeta:
    return ManifestFileMeta(m.file_name, m.file_size, m.num_added_files, m.num_deleted_files,
                            _stats(m.partition_stats), m.schema_id, m.min_bucket, m.max_bucket,
                            m.min_level, m.max_level, m.min_row_id, m.max_row_id)


def _global(g: Any) -> GlobalIndexMeta | None:
    if g is None:
        return None
    return GlobalIndexMeta(g.row_range_start, g.row_range_end, g.index_field_id,
                           _opt_tuple(g.extra_field_ids), g.index_meta, g.source_meta)


def _index_entry(e: Any) -> IndexManifestEntry:
    f = e.index_file
    ranges = None if f.dv_ranges is None else tuple(
        DeletionVectorMeta(d.data_file_name, d.offset, d.length, d.cardinality)
        for d in f.dv_ranges.values())
    return IndexManifestEntry(e.kind, _row(e.partition), e.bucket, IndexFileMeta(
        f.index_type, f.file_name, f.file_size, f.row_count, ranges, f.external_path,
        _global(f.global_index_meta)))


def read_with_pypaimon(table: Any, name: str, kind: str) -> list[Any]:
    """pypaimon's reading of ``manifest/<name>`` (a ``file_kind``), as paimond dataclasses."""
    if kind == "index":
        return [_index_entry(e) for e in IndexManifestFile(table).read(name)]
    if kind == "list":
        return [_meta(m) for m in ManifestListManager(table).read(name)]
    return [_entry(e) for e in ManifestFileManager(table).read(name, drop_stats=False)]
