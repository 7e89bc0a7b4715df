"""Manifest files (``manifest/manifest-<uuid>-<n>``): Avro records of Java ``ManifestEntry``.

Java: ``ManifestEntrySerializer``, ``DataFileMetaSerializer`` / ``DataFileMeta.SCHEMA`` and
``SimpleStats`` (apache/paimon ``5dacde516b``, 2.1-SNAPSHOT). BinaryRow-valued fields stay the
raw bytes Java stores (4-byte big-endian arity + row): identity compares bytes, so nothing
here decodes them. Reading goes by field name, so files with fewer or more fields than
:data:`~paimond.format.meta.avro_schemas.MANIFEST_ENTRY_SCHEMA` still decode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from paimond.errors import CodecError
from paimond.format.meta.avro_container import PrefixSizes, read_records, write_records
from paimond.format.meta.avro_schemas import MANIFEST_ENTRY_SCHEMA, int32, optional_int32

MANIFEST_ENTRY_VERSION = 2
FILE_KIND_ADD, FILE_KIND_DELETE = 0, 1

_T = TypeVar("_T")
Record = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SimpleStats:
    """Min, max and null counts of some columns, as Java ``SimpleStats``."""

    min_values: bytes  # manifest BinaryRow bytes, exactly as stored
    max_values: bytes
    null_counts: tuple[int | None, ...] | None


_EMPTY_ROW = b"\0\0\0\0" + bytes(8)
EMPTY_STATS = SimpleStats(_EMPTY_ROW, _EMPTY_ROW, ())


@dataclass(frozen=True, slots=True)
class DataFileMeta:
    """One data file, as Java ``DataFileMeta`` (the ``_FILE`` record), fields in schema order."""

    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int
    extra_files: tuple[str, ...]
    creation_time_millis: int | None  # local wall-clock millis, as Java writes them
    delete_row_count: int | None  # None: unknown, treat as "has deletes"
    embedded_index: bytes | None
    file_source: int | None  # 0 APPEND, 1 COMPACT
    value_stats_cols: tuple[str, ...] | None  # None: all value columns
    external_path: str | None
    first_row_id: int | None
    write_cols: tuple[str, ...] | None
    write_cols_sequences: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    kind: int  # FILE_KIND_ADD or FILE_KIND_DELETE
    partition: bytes  # manifest BinaryRow bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> tuple[Any, ...]:
        """Java ``FileEntry.Identifier``: a DELETE removes the ADD with the same identifier."""
        f = self.file
        return (self.partition, self.bucket, f.level, f.file_name, f.extra_files,
                f.embedded_index, f.external_path)


# ------------------------------------------------------------------ shared helpers


def optional_tuple(values: Sequence[_T] | None) -> tuple[_T, ...] | None:
    return None if values is None else tuple(values)


def optional_list(values: Sequence[_T] | None) -> list[_T] | None:
    return None if values is None else list(values)


def stats_from_record(record: Record) -> SimpleStats:
    return SimpleStats(record["_MIN_VALUES"], record["_MAX_VALUES"],
                       optional_tuple(record.get("_NULL_COUNTS")))


def stats_to_record(stats: SimpleStats) -> Record:
    return {"_MIN_VALUES": stats.min_values, "_MAX_VALUES": stats.max_values,
            "_NULL_COUNTS": optional_list(stats.null_counts)}


def check_version(record: Record, expected: int, what: str) -> None:
    version = record["_VERSION"]
    if version != expected:
        hint = " (an older format; Java asks to recreate the table)" if version < expected else ""
        raise CodecError(f"{what} has _VERSION {version}, expected {expected}{hint}")


def check_kind(kind: int, what: str) -> int:
    if kind != FILE_KIND_ADD and kind != FILE_KIND_DELETE:
        raise CodecError(f"{what} has unknown _KIND {kind}, expected 0 (ADD) or 1 (DELETE)")
    return kind


def decode_records(data: bytes, convert: Callable[[Record], _T], what: str) -> list[_T]:
    """``convert`` applied to every record of an Avro file; every failure is a CodecError."""
    records = read_records(data)
    try:
        return [convert(r) for r in records]
    except KeyError as e:
        raise CodecError(f"{what} lacks required field {e.args[0]}") from e
    except (TypeError, AttributeError, ValueError) as e:  # e.g. null where a record belongs
        raise CodecError(f"{what} has a malformed record: {e}") from e


# ------------------------------------------------------------------ manifest entries


def _file_from_record(f: Record) -> DataFileMeta:
    g = f.get
    return DataFileMeta(
        f["_FILE_NAME"], f["_FILE_SIZE"], f["_ROW_COUNT"], f["_MIN_KEY"], f["_MAX_KEY"],
        stats_from_record(f["_KEY_STATS"]), stats_from_record(f["_VALUE_STATS"]),
        f["_MIN_SEQUENCE_NUMBER"], f["_MAX_SEQUENCE_NUMBER"], f["_SCHEMA_ID"], f["_LEVEL"],
        tuple(f["_EXTRA_FILES"]), g("_CREATION_TIME"), g("_DELETE_ROW_COUNT"),
        g("_EMBEDDED_FILE_INDEX"), g("_FILE_SOURCE"), optional_tuple(g("_VALUE_STATS_COLS")),
        g("_EXTERNAL_PATH"), g("_FIRST_ROW_ID"), optional_tuple(g("_WRITE_COLS")),
        optional_tuple(g("_WRITE_COLS_SEQUENCES")),
    )


def _entry_from_record(r: Record) -> ManifestEntry:
    check_version(r, MANIFEST_ENTRY_VERSION, "manifest entry")
    return ManifestEntry(check_kind(r["_KIND"], "manifest entry"), r["_PARTITION"],
                         r["_BUCKET"], r["_TOTAL_BUCKETS"], _file_from_record(r["_FILE"]))


def entry_from_record(r: Record) -> ManifestEntry:
    """One decoded Avro record as a manifest entry (for decoders that skip records)."""
    return _entry_from_record(r)


def _file_to_record(f: DataFileMeta) -> Record:
    return {
        "_FILE_NAME": f.file_name,
        "_FILE_SIZE": f.file_size,
        "_ROW_COUNT": f.row_count,
        "_MIN_KEY": f.min_key,
        "_MAX_KEY": f.max_key,
        "_KEY_STATS": stats_to_record(f.key_stats),
        "_VALUE_STATS": stats_to_record(f.value_stats),
        "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
        "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
        "_SCHEMA_ID": f.schema_id,
        "_LEVEL": int32(f.level, "_LEVEL"),
        "_EXTRA_FILES": list(f.extra_files),
        "_CREATION_TIME": f.creation_time_millis,
        "_DELETE_ROW_COUNT": f.delete_row_count,
        "_EMBEDDED_FILE_INDEX": f.embedded_index,
        "_FILE_SOURCE": optional_int32(f.file_source, "_FILE_SOURCE"),
        "_VALUE_STATS_COLS": optional_list(f.value_stats_cols),
        "_EXTERNAL_PATH": f.external_path,
        "_FIRST_ROW_ID": f.first_row_id,
        "_WRITE_COLS": optional_list(f.write_cols),
        "_WRITE_COLS_SEQUENCES": optional_list(f.write_cols_sequences),
    }


def _entry_to_record(e: ManifestEntry) -> Record:
    return {"_VERSION": MANIFEST_ENTRY_VERSION, "_KIND": int32(e.kind, "_KIND"),
            "_PARTITION": e.partition, "_BUCKET": int32(e.bucket, "_BUCKET"),
            "_TOTAL_BUCKETS": int32(e.total_buckets, "_TOTAL_BUCKETS"),
            "_FILE": _file_to_record(e.file)}


def decode_manifest(data: bytes) -> list[ManifestEntry]:
    """The entries of a manifest file, in file order.

    Raises CodecError for malformed Avro, an unknown ``_VERSION`` or a missing required field."""
    return decode_records(data, _entry_from_record, "manifest entry")


def encode_manifest(entries: Sequence[ManifestEntry], *, compression: str = "zstd",
                    zstd_level: int = 1) -> bytes:
    """A manifest file as Java writes it; ``compression`` is a ``manifest.compression`` value.

    Raises ValueError for an unknown compression or a value outside its Avro type."""
    return write_records(MANIFEST_ENTRY_SCHEMA, map(_entry_to_record, entries),
                         compression=compression, zstd_level=zstd_level)


def manifest_sizes(entries: Sequence[ManifestEntry], *, first: int = 0,
                   compression: str = "zstd", zstd_level: int = 1
                   ) -> PrefixSizes[ManifestEntry]:
    """The size :func:`encode_manifest` gives each prefix of ``entries[first:]``, as far as
    asked."""
    return PrefixSizes(MANIFEST_ENTRY_SCHEMA, entries, _entry_to_record, first=first,
                       compression=compression, zstd_level=zstd_level)
