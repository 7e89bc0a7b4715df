"""Index manifests (``manifest/index-manifest-<uuid>-<n>``): Avro records of Java ``IndexManifestEntry``.

Java: ``IndexManifestEntry.SCHEMA``, ``IndexManifestEntrySerializer``, ``IndexFileMeta``,
``DeletionVectorMeta`` and ``GlobalIndexMeta`` (apache/paimon ``5dacde516b``, 2.1-SNAPSHOT).
Java keeps ``dvRanges`` in a map keyed by data file; here they stay a tuple in file order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from paimond.errors import CodecError
from paimond.format.meta.avro_container import write_records
from paimond.format.meta.avro_schemas import INDEX_MANIFEST_ENTRY_SCHEMA, int32
from paimond.format.meta.manifest import (
    Record,
    check_kind,
    check_version,
    decode_records,
    optional_tuple,
)

INDEX_MANIFEST_ENTRY_VERSION = 1
INDEX_TYPE_DELETION_VECTORS = "DELETION_VECTORS"
INDEX_TYPE_HASH = "HASH"


@dataclass(frozen=True, slots=True)
class DeletionVectorMeta:
    """Where one data file's deletion vector sits inside a DV index file."""

    data_file_name: str
    offset: int  # bytes from the start of the index file
    length: int  # bytes
    cardinality: int | None  # deleted rows; None when unknown


@dataclass(frozen=True, slots=True)
class GlobalIndexMeta:
    row_range_start: int
    row_range_end: int
    index_field_id: int
    extra_field_ids: tuple[int, ...] | None
    index_meta: bytes | None
    source_meta: bytes | None


@dataclass(frozen=True, slots=True)
class IndexFileMeta:
    index_type: str  # INDEX_TYPE_DELETION_VECTORS, INDEX_TYPE_HASH or a global index type
    file_name: str
    file_size: int  # bytes
    row_count: int  # DV: number of vectors; HASH: number of ints
    dv_ranges: tuple[DeletionVectorMeta, ...] | None
    external_path: str | None
    global_index: GlobalIndexMeta | None


@dataclass(frozen=True, slots=True)
class IndexManifestEntry:
    kind: int  # FILE_KIND_ADD or FILE_KIND_DELETE
    partition: bytes  # manifest BinaryRow bytes
    bucket: int
    index_file: IndexFileMeta


def _dv_from_record(r: Record | None) -> DeletionVectorMeta:
    if r is None:  # the schema allows it, but Java cannot read it back
        raise CodecError("index manifest entry has a null element in _DELETIONS_VECTORS_RANGES")
    return DeletionVectorMeta(r["f0"], r["f1"], r["f2"], r.get("_CARDINALITY"))


def _global_from_record(r: Record | None) -> GlobalIndexMeta | None:
    if r is None:
        return None
    return GlobalIndexMeta(r["_ROW_RANGE_START"], r["_ROW_RANGE_END"], r["_INDEX_FIELD_ID"],
                           optional_tuple(r.get("_EXTRA_FIELD_IDS")), r.get("_INDEX_META"),
                           r.get("_SOURCE_META"))


def _entry_from_record(r: Record) -> IndexManifestEntry:
    check_version(r, INDEX_MANIFEST_ENTRY_VERSION, "index manifest entry")
    ranges = r.get("_DELETIONS_VECTORS_RANGES")
    index_file = IndexFileMeta(
        r["_INDEX_TYPE"], r["_FILE_NAME"], r["_FILE_SIZE"], r["_ROW_COUNT"],
        None if ranges is None else tuple(map(_dv_from_record, ranges)),
        r.get("_EXTERNAL_PATH"), _global_from_record(r.get("_GLOBAL_INDEX")),
    )
    return IndexManifestEntry(check_kind(r["_KIND"], "index manifest entry"), r["_PARTITION"],
                              r["_BUCKET"], index_file)


def _dv_to_record(dv: DeletionVectorMeta) -> Record:
    return {"f0": dv.data_file_name, "f1": int32(dv.offset, "f1"),
            "f2": int32(dv.length, "f2"), "_CARDINALITY": dv.cardinality}


def _global_to_record(g: GlobalIndexMeta | None) -> Record | None:
    if g is None:
        return None
    return {"_ROW_RANGE_START": g.row_range_start, "_ROW_RANGE_END": g.row_range_end,
            "_INDEX_FIELD_ID": int32(g.index_field_id, "_INDEX_FIELD_ID"),
            "_EXTRA_FIELD_IDS": None if g.extra_field_ids is None else [
                int32(i, "_EXTRA_FIELD_IDS") for i in g.extra_field_ids],
            "_INDEX_META": g.index_meta, "_SOURCE_META": g.source_meta}


def _entry_to_record(e: IndexManifestEntry) -> Record:
    f = e.index_file
    return {
        "_VERSION": INDEX_MANIFEST_ENTRY_VERSION,
        "_KIND": int32(e.kind, "_KIND"),
        "_PARTITION": e.partition,
        "_BUCKET": int32(e.bucket, "_BUCKET"),
        "_INDEX_TYPE": f.index_type,
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_DELETIONS_VECTORS_RANGES": (
            None if f.dv_ranges is None else [_dv_to_record(dv) for dv in f.dv_ranges]),
        "_EXTERNAL_PATH": f.external_path,
        "_GLOBAL_INDEX": _global_to_record(f.global_index),
    }


def decode_index_manifest(data: bytes) -> list[IndexManifestEntry]:
    """The entries of an index manifest, in file order.

    Raises CodecError for malformed Avro, an unknown ``_VERSION`` or a missing required field."""
    return decode_records(data, _entry_from_record, "index manifest entry")


def encode_index_manifest(entries: Sequence[IndexManifestEntry], *, compression: str = "zstd",
                          zstd_level: int = 1) -> bytes:
    """An index manifest as Java writes it; ``compression`` is a ``manifest.compression`` value.

    Raises ValueError for an unknown compression or a value outside its Avro type."""
    return write_records(INDEX_MANIFEST_ENTRY_SCHEMA, map(_entry_to_record, entries),
                         compression=compression, zstd_level=zstd_level)
