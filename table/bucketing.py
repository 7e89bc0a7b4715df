"""Paimon's bucket of a row: which fixed bucket a row's bucket key goes to, for ``N`` buckets
(Java ``BucketFunction``: ``DefaultBucketFunction``, ``ModBucketFunction``; the key is what
``FixedBucketRowKeyExtractor`` projects; apache/paimon 5dacde516b, unchanged since 1.1).

- ``default``: the bucket key as a ``BinaryRow`` (row kind INSERT), hashed by
  ``MurmurHashUtils.hashBytesByWords`` (Murmur3 x86 32-bit over its 32-bit little-endian
  words, seed 42, length mixed in), bucket ``abs(hash % N)`` with Java's truncating ``%``.
- ``mod``: a single INT or BIGINT key, ``floorMod(key, N)``.
- ``hive`` (Hive's own hashing of each type) is not implemented: :func:`bucket_function_of`
  raises UnsupportedError naming the option.

The bucket key is ``bucket-key`` (comma-separated) or, without it, the trimmed primary key.
Whole columns are hashed at once in numpy; keys of integer-like types are laid out as
``BinaryRow`` bytes in numpy too, other types row by row through :func:`encode_row`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import UnsupportedError
from paimond.format.binary.binary_row import encode_row, null_bits_size
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import DataType
from paimond.table.data_files.file_stats import row_values
from paimond.table.options.core import TableOptions

_SEED = 42
_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
# The types whose value sits in the BinaryRow slot itself, little-endian, by numpy dtype.
_SLOT_DTYPES = {"BOOLEAN": np.uint8, "TINYINT": np.int8, "SMALLINT": np.int16, "INT": np.int32,
                "DATE": np.int32, "TIME": np.int32, "BIGINT": np.int64}


def bucket_key_names(schema: TableSchema, options: TableOptions) -> tuple[str, ...]:
    """``bucket-key`` if set, else the trimmed primary key (Java ``TableSchema.bucketKeys``)."""
    configured = options.text("bucket-key")
    if configured:
        return tuple(name.strip() for name in configured.split(",") if name.strip())
    return schema.trimmed_primary_keys


@dataclass(frozen=True, slots=True)
class BucketFunction:
    """The buckets of rows for one table: ``kind`` is ``default`` or ``mod``."""

    kind: str
    names: tuple[str, ...]
    types: tuple[DataType, ...]

    def buckets(self, rows: pa.Table | pa.RecordBatch, num_buckets: int) -> np.ndarray:
        """Each row's bucket (int32) in ``num_buckets``, read from the key columns by name."""
        if num_buckets <= 0:
            raise ValueError(f"bucket number must be positive, got {num_buckets}")
        columns = [rows.column(name) for name in self.names]
        if self.kind == "mod":
            values = _integers(columns[0])
            return np.mod(values.astype(np.int64), num_buckets).astype(np.int32)
        hashes = _row_hashes(columns, self.types, rows.num_rows)
        return np.abs(np.fmod(hashes.astype(np.int64), num_buckets)).astype(np.int32)

    def split(self, rows: pa.Table, num_buckets: int) -> Iterator[tuple[int, pa.Table]]:
        """``rows`` by bucket, in bucket order; each bucket's rows keep their order."""
        buckets = self.buckets(rows, num_buckets)
        if not len(buckets):
            return
        order = np.argsort(buckets, kind="stable")
        ordered = buckets[order]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        for start, end in zip(starts, [*starts[1:], len(order)], strict=True):
            yield int(ordered[start]), rows.take(order[start:end])


def bucket_function_of(schema: TableSchema, options: TableOptions) -> BucketFunction:
    """The table's bucket function; UnsupportedError for ``bucket-function.type=hive`` or a
    ``mod`` function whose key is not one INT or BIGINT field (Java refuses that too)."""
    names = bucket_key_names(schema, options)
    by_name = {f.name: f.type for f in schema.fields}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UnsupportedError(f"bucket-key names no column of the table: {', '.join(unknown)}")
    types = tuple(by_name[n] for n in names)
    kind = (options.text("bucket-function.type") or "default").lower()
    if kind == "mod":
        if len(types) != 1 or types[0].name not in ("INT", "BIGINT"):
            raise UnsupportedError("bucket-function.type=mod needs one INT or BIGINT bucket key")
    elif kind != "default":
        raise UnsupportedError(f"bucket-function.type={kind}: paimond computes the default and "
                               "mod bucket functions only")
    return BucketFunction(kind, names, types)


def _integers(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    if column.null_count:
        raise ValueError("a bucket key of the mod bucket function is null")
    return np.asarray(column.to_numpy(zero_copy_only=False))


def _row_hashes(columns: Sequence[pa.ChunkedArray | pa.Array], types: Sequence[DataType],
                rows: int) -> np.ndarray:
    """``BinaryRow.hashCode()`` of each row's key (a Java int, as int32)."""
    if all(t.name in _SLOT_DTYPES for t in types):
        return hash_words(fixed_width_rows(columns, types, rows))
    batch = pa.RecordBatch.from_arrays(
        [pa.concat_arrays(c.chunks) if isinstance(c, pa.ChunkedArray) else c for c in columns],
        names=[str(i) for i in range(len(columns))])
    names = list(batch.schema.names)
    encoded = [encode_row(row_values(batch, i, names, types), types) for i in range(rows)]
    hashes = np.empty(rows, np.int32)
    lengths = np.fromiter((len(b) for b in encoded), np.int64, rows)
    for length in np.unique(lengths):  # one matrix of words per row length
        where = np.flatnonzero(lengths == length)
        words = np.frombuffer(b"".join(encoded[i] for i in where), "<u4").reshape(len(where), -1)
        hashes[where] = hash_words(words)
    return hashes


def fixed_width_rows(columns: Sequence[pa.ChunkedArray | pa.Array], types: Sequence[DataType],
                rows: int) -> np.ndarray:
    """The BinaryRow bytes of keys whose every field sits in its slot, as uint32 words."""
    header = null_bits_size(len(columns))
    width = header + 8 * len(columns)
    data = np.zeros((rows, width), np.uint8)  # row kind INSERT (0) in byte 0
    for i, (column, data_type) in enumerate(zip(columns, types, strict=True)):
        dtype = _SLOT_DTYPES[data_type.name]
        nulls = np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), bool)
        filled = pc.fill_null(column, False if dtype is np.uint8 else 0)
        if pa.types.is_date32(filled.type) or pa.types.is_time32(filled.type):
            filled = filled.cast(pa.int32())
        values = np.asarray(filled.to_numpy(zero_copy_only=False)).astype(dtype)
        slot = header + 8 * i
        size = np.dtype(dtype).itemsize
        data[:, slot:slot + size] = values.astype(np.dtype(dtype).newbyteorder("<")).view(
            np.uint8).reshape(rows, size)
        bit = i + 8  # null bits follow the row kind byte's 8 bits
        data[nulls, bit >> 3] |= np.uint8(1 << (bit & 7))
    return data.view("<u4").reshape(rows, width // 4)


def hash_words(words: np.ndarray) -> np.ndarray:
    """``MurmurHashUtils.hashBytesByWords`` of each row of ``words`` (rows x 32-bit words,
    little-endian), as int32 (Java's int)."""
    words = words.astype(np.uint32, copy=False)
    h = np.full(words.shape[0], _SEED, np.uint32)
    with np.errstate(over="ignore"):
        for column in range(words.shape[1]):
            k = words[:, column] * _C1
            k = (k << np.uint32(15)) | (k >> np.uint32(17))
            h ^= k * _C2
            h = (h << np.uint32(13)) | (h >> np.uint32(19))
            h = h * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= np.uint32(words.shape[1] * 4)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    return h.view(np.int32)
