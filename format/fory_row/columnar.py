"""Flat Fory standard rows encoded and read column-wise with numpy, for millions of rows.

The row-at-a-time writer (``writer``) costs microseconds per row; the key-lookup cache
encodes whole data files of keys. Here every row of a table of flat fields (integers,
booleans, strings, binaries; at most 64 fields) is laid out at once: the null bitmap word,
one 8-byte slot per field (fixed-width values little-endian at the start of the slot, zero
padded; strings and binaries as ``(relative offset << 32) | size``), then the variable
region, each value zero-padded to 8 bytes. The bytes are exactly those the row writer
produces for the same values (the tests check it).

When every field is fixed-width all rows have one size, and ``fixed_columns`` views a field
of every row as a numpy array without copying: what makes binary search over cached rows
vectorized.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import CodecError, UnsupportedError
from paimond.format.fory_row.layout import bitmap_size

_INTEGERS = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 4, pa.int64(): 8, pa.bool_(): 1}
_CHUNK_ROWS = 1 << 18


def _is_variable(data_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(data_type) or pa.types.is_binary(data_type)
                or pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type))


def check_flat(schema: pa.Schema) -> None:
    """Raise UnsupportedError unless ``schema`` is flat fields this module encodes."""
    if len(schema) > 64:
        raise UnsupportedError(f"{len(schema)} fields: columnar rows take at most 64")
    for field in schema:
        if field.type not in _INTEGERS and not _is_variable(field.type):
            raise UnsupportedError(f"field {field.name}: {field.type} is not a flat integer, "
                                   "boolean, string or binary type")


def fixed_stride(schema: pa.Schema) -> int | None:
    """The size of every row when all fields are fixed-width, else None."""
    if any(_is_variable(f.type) for f in schema):
        return None
    return bitmap_size(len(schema)) + 8 * len(schema)


def _pad8(sizes: np.ndarray) -> np.ndarray:
    return (sizes + 7) & ~np.int64(7)


def encode_flat_rows(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """All rows of ``table``: the bytes (uint8) and the start of every row plus the end
    (``len(table) + 1`` int64 offsets)."""
    check_flat(table.schema)
    stride = fixed_stride(table.schema)
    if stride is not None and len(table.schema):
        return _encode_fixed(table, stride)
    parts, ends, base = [], [np.zeros(1, np.int64)], 0
    for start in range(0, max(table.num_rows, 1), _CHUNK_ROWS):
        chunk = table.slice(start, _CHUNK_ROWS)
        if chunk.num_rows == 0:
            break
        data, offsets = _encode_chunk(chunk)
        parts.append(data)
        ends.append(offsets[1:] + base)
        base += len(data)
    data = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return data, np.concatenate(ends)


def _encode_fixed(table: pa.Table, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows of fixed-width fields: one (rows x words) array, filled a column at a time."""
    count, fields = table.num_rows, len(table.schema)
    words = np.zeros((count, stride // 8), dtype=np.uint64)
    bitmap_words = bitmap_size(fields) // 8
    for i in range(fields):
        column = table.column(i).combine_chunks()
        valid = _valid(column)
        if valid is not None:
            words[:, 0] |= (~valid).astype(np.uint64) << np.uint64(i)
        words[:, bitmap_words + i] = _slot_words(column)
    offsets = np.arange(0, (count + 1) * stride, stride, dtype=np.int64)
    return words.reshape(-1).view(np.uint8), offsets


def _encode_chunk(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    count, fields = table.num_rows, len(table.schema)
    fixed = bitmap_size(fields) + 8 * fields
    columns = [table.column(i).combine_chunks() for i in range(fields)]
    variable = {i: _variable_parts(c) for i, c in enumerate(columns)
                if _is_variable(c.type)}
    sizes = np.full(count, fixed, dtype=np.int64)
    for lengths, _, _ in variable.values():
        sizes += _pad8(lengths)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    out = np.zeros(int(offsets[-1]), dtype=np.uint8)
    words = out.view("<u8")
    row_words = offsets[:-1] // 8
    null_bits = np.zeros(count, dtype=np.uint64)
    variable_at = np.full(count, fixed, dtype=np.int64)
    for i, column in enumerate(columns):
        valid = _valid(column)
        if valid is not None:
            null_bits |= (~valid).astype(np.uint64) << np.uint64(i)
        slot = row_words + bitmap_size(fields) // 8 + i
        if i in variable:
            lengths, data, starts = variable[i]
            words[slot] = (variable_at.astype(np.uint64) << np.uint64(32)) | lengths.astype(
                np.uint64)
            if valid is not None:
                words[slot[~valid]] = 0
            _scatter(out, data, starts, offsets[:-1] + variable_at, lengths)
            variable_at += _pad8(lengths)
        else:
            words[slot] = _slot_words(column)
    if fields:
        words[row_words] = null_bits
    return out, offsets


def _valid(column: pa.Array) -> np.ndarray | None:
    if column.null_count == 0:
        return None
    return np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _slot_words(column: pa.Array) -> np.ndarray:
    """Fixed-width values as the 8-byte slots they fill: little-endian, zero-extended."""
    filled = column.fill_null(False if pa.types.is_boolean(column.type) else 0)
    values = np.asarray(filled.to_numpy(zero_copy_only=False))
    if values.dtype == np.bool_:
        return values.astype(np.uint64)
    width = values.dtype.itemsize
    unsigned = values.view(f"<u{width}") if width > 1 else values.view(np.uint8)
    return unsigned.astype(np.uint64)


def _variable_parts(column: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(byte lengths, 0 for nulls; the value bytes; where each value starts in them)."""
    lengths = pc.fill_null(pc.binary_length(column), 0)
    lengths = np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.int64)
    buffers = column.buffers()
    large = pa.types.is_large_string(column.type) or pa.types.is_large_binary(column.type)
    offset_type = np.int64 if large else np.int32
    starts = np.frombuffer(buffers[1], dtype=offset_type)[
        column.offset:column.offset + len(column)].astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None and len(
        buffers[2]) else np.zeros(0, np.uint8)
    return lengths, data, starts


def _scatter(out: np.ndarray, data: np.ndarray, starts: np.ndarray, targets: np.ndarray,
             lengths: np.ndarray) -> None:
    """Copy ``data[starts[i]:starts[i]+lengths[i]]`` to ``out[targets[i]:...]`` for every i."""
    total = int(lengths.sum())
    if total == 0:
        return
    before = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=before[1:])
    within = np.arange(total, dtype=np.int64) - np.repeat(before, lengths)
    out[np.repeat(targets, lengths) + within] = data[np.repeat(starts, lengths) + within]


def fixed_columns(data: np.ndarray | memoryview | bytes, schema: pa.Schema, count: int
                  ) -> dict[str, np.ndarray]:
    """Every field of ``count`` fixed-size rows as a numpy array viewing ``data`` (no copy).
    Raises CodecError if ``data`` does not hold exactly that many rows."""
    stride = fixed_stride(schema)
    if stride is None:
        raise UnsupportedError("fixed_columns needs fixed-width fields only")
    buffer = np.frombuffer(data, dtype=np.uint8)
    if len(buffer) != stride * count:
        raise CodecError(f"{len(buffer)} bytes of rows, {count} rows of {stride} bytes need "
                         f"{stride * count}")
    base = bitmap_size(len(schema))
    dtype = np.dtype({
        "names": [f.name for f in schema],
        "formats": ["?" if pa.types.is_boolean(f.type) else f"<i{_INTEGERS[f.type]}"
                    for f in schema],
        "offsets": [base + 8 * i for i in range(len(schema))],
        "itemsize": stride})
    rows = buffer.view(dtype) if count else np.zeros(0, dtype)
    return {f.name: rows[f.name] for f in schema}


def decode_flat_rows(data: np.ndarray | memoryview | bytes, offsets: np.ndarray,
                     schema: pa.Schema) -> pa.Table:
    """Rows that ``encode_flat_rows`` laid out (starts and end in ``offsets``), back as a
    table, vectorized. Raises CodecError for a row shorter than its fixed part, a slot
    pointing outside its row, or a null bit past the last field."""
    check_flat(schema)
    buffer = np.frombuffer(data, dtype=np.uint8)
    starts = np.asarray(offsets[:-1], dtype=np.int64)
    ends = np.asarray(offsets[1:], dtype=np.int64)
    count, fields = len(starts), len(schema)
    fixed = bitmap_size(fields) + 8 * fields
    if count and (int(ends[-1]) > len(buffer) or bool(((ends - starts) < fixed).any())
                  or bool((starts % 8 != 0).any())):
        raise CodecError("row offsets outside the buffer, misaligned, or rows shorter than "
                         f"their {fixed}-byte fixed part")
    words = buffer[:len(buffer) - len(buffer) % 8].view("<u8")
    first_word = starts // 8
    null_bits = words[first_word] if count else np.zeros(0, dtype=np.uint64)
    if fields < 64 and bool((null_bits >> np.uint64(fields)).any()):
        raise CodecError("null bits set past the last field")
    columns = []
    for i, field in enumerate(schema):
        slots = words[first_word + bitmap_size(fields) // 8 + i]
        valid = ((null_bits >> np.uint64(i)) & np.uint64(1)) == 0
        mask = None if bool(valid.all()) else ~valid
        if _is_variable(field.type):
            columns.append(_variable_column(buffer, starts, ends, fixed, slots, valid, field.type))
        else:
            columns.append(pa.array(_fixed_values(slots, field.type), type=field.type, mask=mask))
    return pa.Table.from_arrays(columns, schema=schema)


def _fixed_values(slots: np.ndarray, data_type: pa.DataType) -> np.ndarray:
    if pa.types.is_boolean(data_type):
        return (slots & np.uint64(1)).astype(bool)
    width = _INTEGERS[data_type]
    low = (slots & np.uint64((1 << (8 * width)) - 1)).astype(f"<u{width}")
    return low.view(f"<i{width}")


def _variable_column(buffer: np.ndarray, starts: np.ndarray, ends: np.ndarray, fixed: int,
                     slots: np.ndarray, valid: np.ndarray, data_type: pa.DataType) -> pa.Array:
    relative = (slots >> np.uint64(32)).astype(np.int64)
    sizes = np.where(valid, (slots & np.uint64(0xFFFFFFFF)).astype(np.int64), 0)
    begins = starts + relative
    if bool((valid & ((relative < fixed) | (begins + sizes > ends))).any()):
        raise CodecError("a string or binary slot points outside its row")
    value_offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=value_offsets[1:])
    # Each row's value lies inside that row, rows in order: the bytes to keep are marked by
    # +1 at every start and -1 at every end, summed (no per-byte index arrays).
    # (Starts are distinct, ends too, and no end is another value's start: rows hold their
    # fixed part between one value's end and the next one's start.)
    marks = np.zeros(len(buffer) + 1, dtype=np.int8)
    present = sizes > 0
    marks[begins[present]] = 1
    marks[(begins + sizes)[present]] = -1
    values = buffer[np.cumsum(marks[:-1], dtype=np.int8) > 0]
    large = pa.types.is_large_string(data_type) or pa.types.is_large_binary(data_type)
    offset_array = value_offsets if large else value_offsets.astype(np.int32)
    validity = None if bool(valid.all()) else pa.array(valid).buffers()[1]
    array = pa.Array.from_buffers(data_type, len(sizes),
                                  [validity, pa.py_buffer(offset_array.tobytes()),
                                   pa.py_buffer(values.tobytes())])
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        try:
            array.validate(full=True)
        except pa.ArrowInvalid as error:
            raise CodecError(f"a string is not UTF-8: {error}") from None
    return array
