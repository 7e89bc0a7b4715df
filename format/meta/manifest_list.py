"""Manifest lists (``manifest/manifest-list-<uuid>-<n>``): Avro records of Java ``ManifestFileMeta``.

Java: ``ManifestFileMeta.SCHEMA`` and ``ManifestFileMetaSerializer`` (apache/paimon
``5dacde516b``, 2.1-SNAPSHOT). pypaimon 2.1.0 adds ``_TOTAL_BUCKETS`` and ``_EXTRA_FILES``;
reading skips them and writing leaves them out, as Java does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from paimond.format.meta.avro_container import write_records
from paimond.format.meta.avro_schemas import MANIFEST_FILE_META_SCHEMA, optional_int32
from paimond.format.meta.manifest import (
    Record,
    SimpleStats,
    check_version,
    decode_records,
    stats_from_record,
    stats_to_record,
)

MANIFEST_FILE_META_VERSION = 2


@dataclass(frozen=True, slots=True)
class ManifestFileMeta:
    """One manifest file, as a manifest list names it."""

    file_name: str
    file_size: int  # bytes
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats  # over the entries' partitions, untruncated
    schema_id: int  # max of the entries' schema ids
    min_bucket: int | None
    max_bucket: int | None
    min_level: int | None
    max_level: int | None
    min_row_id: int | None  # only when every entry has a first_row_id
    max_row_id: int | None


def _meta_from_record(r: Record) -> ManifestFileMeta:
    check_version(r, MANIFEST_FILE_META_VERSION, "manifest list record")
    g = r.get
    return ManifestFileMeta(
        r["_FILE_NAME"], r["_FILE_SIZE"], r["_NUM_ADDED_FILES"], r["_NUM_DELETED_FILES"],
        stats_from_record(r["_PARTITION_STATS"]), r["_SCHEMA_ID"],
        g("_MIN_BUCKET"), g("_MAX_BUCKET"), g("_MIN_LEVEL"), g("_MAX_LEVEL"),
        g("_MIN_ROW_ID"), g("_MAX_ROW_ID"),
    )


def _meta_to_record(m: ManifestFileMeta) -> Record:
    return {
        "_VERSION": MANIFEST_FILE_META_VERSION,
        "_FILE_NAME": m.file_name,
        "_FILE_SIZE": m.file_size,
        "_NUM_ADDED_FILES": m.num_added_files,
        "_NUM_DELETED_FILES": m.num_deleted_files,
        "_PARTITION_STATS": stats_to_record(m.partition_stats),
        "_SCHEMA_ID": m.schema_id,
        "_MIN_BUCKET": optional_int32(m.min_bucket, "_MIN_BUCKET"),
        "_MAX_BUCKET": optional_int32(m.max_bucket, "_MAX_BUCKET"),
        "_MIN_LEVEL": optional_int32(m.min_level, "_MIN_LEVEL"),
        "_MAX_LEVEL": optional_int32(m.max_level, "_MAX_LEVEL"),
        "_MIN_ROW_ID": m.min_row_id,
        "_MAX_ROW_ID": m.max_row_id,
    }


def decode_manifest_list(data: bytes) -> list[ManifestFileMeta]:
    """The manifest files a manifest list names, in file order.

    Raises CodecError for malformed Avro, an unknown ``_VERSION`` or a missing required field."""
    return decode_records(data, _meta_from_record, "manifest list record")


def encode_manifest_list(metas: Sequence[ManifestFileMeta], *, compression: str = "zstd",
                         zstd_level: int = 1) -> bytes:
    """A manifest list as Java writes it; ``compression`` is a ``manifest.compression`` value.

    Raises ValueError for an unknown compression or a value outside its Avro type."""
    return write_records(MANIFEST_FILE_META_SCHEMA, map(_meta_to_record, metas),
                         compression=compression, zstd_level=zstd_level)
