""".row files: byte identity with Java's golden files, hypothesis round trips (Python values
and Arrow batches, any block size), random access that reads one block, selections and
projections, and corrupt files that raise CorruptFileError naming the file."""

from __future__ import annotations

import io
import struct
from decimal import Decimal
from typing import Any, BinaryIO

import pyarrow as pa
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap
from support.row_file_parts import decompress, split
from support.row_values import (
    ROW_TYPES,
    ROWFILE_DIR,
    canon,
    golden_entries,
    golden_rows,
    rows_of,
)

from paimond.errors import CorruptFileError, UnsupportedError
from paimond.format.row_file.codec import encode_row
from paimond.format.row_file.file import RowFileFooter, RowFileReader, RowFileWriter
from paimond.format.row_file.index import (
    FOOTER_SIZE,
    BlockIndex,
    decode_footer,
    encode_block_index,
    encode_footer,
)
from paimond.format.types.data_types import (
    MAX_LENGTH,
    ArrayType,
    BigIntType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    MapType,
    RowType,
    VarCharType,
    VariantType,
    VectorType,
    row_type,
)

PATH = "warehouse/db.db/t/bucket-0/data-x.row"
SIMPLE = row_type(("id", IntType()), ("name", VarCharType(length=MAX_LENGTH)),
                  ("score", DoubleType()))
SIMPLE_ROWS = [(i, None if i % 10 == 9 else f"name-{i}", i * 1.5) for i in range(100)]
GOLDEN_FILES = ["all_types", "simple_multiblock", "simple_single_block", "empty"]


def write(rtype: RowType, rows: list[Any], block_size: int = 65536, level: int = 1) -> bytes:
    sink = io.BytesIO()
    writer = RowFileWriter(sink, rtype, block_size_bytes=block_size, zstd_level=level)
    writer.write_rows(rows)
    writer.close()
    return sink.getvalue()


def reader(data: bytes, rtype: RowType, source: BinaryIO | None = None) -> RowFileReader:
    return RowFileReader(source or io.BytesIO(data), rtype, path=PATH)


def assemble(blocks: list[bytes], row_starts: list[int], rows: int, *,
             frames: list[bytes] | None = None, compressed: list[int] | None = None,
             uncompressed: list[int] | None = None) -> bytes:
    """A file of the given uncompressed blocks, with an index that may lie."""
    if frames is None:
        compressor = zstandard.ZstdCompressor()
        frames = []
        for block in blocks:
            stream = compressor.compressobj()
            frames.append(stream.compress(block) + stream.flush())
    index = encode_block_index(BlockIndex(tuple(compressed or [len(f) for f in frames]),
                                          tuple(uncompressed or [len(b) for b in blocks]),
                                          tuple(row_starts)))
    body = b"".join(frames)
    return body + index + encode_footer(RowFileFooter(rows, len(frames), len(body), len(index)))


def block_of(rows: list[bytes], offsets: list[int] | None = None, count: int | None = None) -> bytes:
    data = b"".join(rows)
    if offsets is None:
        offsets = [sum(len(r) for r in rows[:i]) for i in range(len(rows))]
    return data + struct.pack(f"<{len(offsets) + 1}i", *offsets,
                              len(rows) if count is None else count)


# ---------------------------------------------------------------- golden files

@pytest.mark.parametrize("name", GOLDEN_FILES)
def test_golden_files_are_written_byte_identical(name: str) -> None:
    entry = golden_entries()[f"rowfile/{name}.row"]
    rtype, rows = golden_rows(entry) if name != "empty" else (SIMPLE, [])
    data = write(rtype, rows, entry.get("block_size_threshold", 65536))
    assert data == (ROWFILE_DIR / f"{name}.row").read_bytes()
    footer, index, frames = split(data)
    assert footer.total_row_count == len(rows) and footer.block_count == len(frames)
    for block in entry.get("blocks", []):
        n = block["block"]
        assert frames[n] == (ROWFILE_DIR / f"{name}.block{n}.zstd").read_bytes()
        assert decompress(frames[n]) == (ROWFILE_DIR / f"{name}.block{n}.uncompressed.bin").read_bytes()
        assert index.row_starts[n] == block["row_start"]
        assert zstandard.get_frame_parameters(frames[n]).content_size == zstandard.CONTENTSIZE_UNKNOWN


def test_one_shot_zstd_would_not_match_java() -> None:
    """Why the writer streams: a one-shot frame carries the content size, Java's does not."""
    golden_entries()
    uncompressed = (ROWFILE_DIR / "simple_single_block.block0.uncompressed.bin").read_bytes()
    java = (ROWFILE_DIR / "simple_single_block.block0.zstd").read_bytes()
    assert zstandard.ZstdCompressor(level=1).compress(uncompressed) != java


@pytest.mark.parametrize("name", GOLDEN_FILES)
def test_golden_files_read_back_their_rows(name: str) -> None:
    entry = golden_entries()[f"rowfile/{name}.row"]
    rtype, rows = golden_rows(entry) if name != "empty" else (SIMPLE, [])
    r = reader((ROWFILE_DIR / f"{name}.row").read_bytes(), rtype)
    assert (r.row_count, r.block_count) == (len(rows), len(entry.get("blocks", [])))
    assert canon([r.read_row(i) for i in range(len(rows))], exact_nan=True) == \
        canon(rows, exact_nan=True)
    if name.startswith("simple"):
        table = pa.Table.from_batches(list(r.read_batches()))
        assert table.to_pylist() == [dict(zip(["id", "name", "score"], row, strict=True))
                                     for row in rows]


def test_golden_all_types_as_arrow() -> None:
    entry = golden_entries()["rowfile/all_types.row"]
    rtype, rows = golden_rows(entry)
    r = reader((ROWFILE_DIR / "all_types.row").read_bytes(), rtype)
    with pytest.raises(UnsupportedError, match="Arrow"):  # f_ltz9 in year 9999 as ns
        list(r.read_batches())
    names = rtype.field_names
    keep = [i for i, n in enumerate(names) if n != "f_ltz9"]
    table = pa.Table.from_batches(list(r.read_batches(projection=keep)))
    assert table.column_names == [names[i] for i in keep]
    assert table["f_decimal_38_10"].to_pylist() == [rows[i][19] for i in range(4)]
    assert table["f_ts9"].cast(pa.int64()).to_pylist() == [
        None if row[23] is None else row[23].nanos for row in rows]
    assert table["f_map"].to_pylist() == [rows[i][28] for i in range(4)]
    nested = {"a": 7, "b": "nested string value"}
    assert table["f_row"].to_pylist() == [nested, None, {"a": None, "b": "x"}, nested]


def test_arrow_batches_write_the_golden_bytes() -> None:
    golden_entries()
    table = pa.table({"id": pa.array([r[0] for r in SIMPLE_ROWS], pa.int32()),
                      "name": [r[1] for r in SIMPLE_ROWS], "score": [r[2] for r in SIMPLE_ROWS]})
    sink = io.BytesIO()
    writer = RowFileWriter(sink, SIMPLE, block_size_bytes=256)
    writer.write_batch(table.slice(0, 40))
    writer.write_batch(table.slice(40).to_batches()[0])
    writer.close()
    assert sink.getvalue() == (ROWFILE_DIR / "simple_multiblock.row").read_bytes()


# ---------------------------------------------------------------- round trips

@st.composite
def files(draw: st.DrawFn, arrow: bool = False) -> tuple[RowType, list[Any], int]:
    rtype = draw(ROW_TYPES, label="row type")
    rows = draw(rows_of(rtype, max_size=30, arrow=arrow), label="rows")
    block_size = draw(st.sampled_from([1, 2, 8, 64, 300, 65536]) | st.integers(1, 500))
    return rtype, rows, block_size


@given(files())
def test_files_round_trip_rows_with_java_block_boundaries(case: tuple[RowType, list[Any], int]) -> None:
    rtype, rows, block_size = case
    sink = io.BytesIO()
    writer = RowFileWriter(sink, rtype, block_size_bytes=block_size)
    writer.write_rows(rows[:3])
    writer.write_rows(iter(rows[3:]))
    assert writer.row_count == len(rows)
    footer = writer.close()
    data = sink.getvalue()
    assert writer.bytes_written == len(data)
    assert footer == split(data)[0]
    r = reader(data, rtype)
    assert canon([r.read_row(i) for i in range(len(rows))]) == canon(rows)
    # Java's flush rule: a block closes on the first row that brings it to the block size.
    _, index, frames = split(data)
    encoded = [encode_row(row, rtype) for row in rows]
    for b, frame in enumerate(frames):
        first = index.row_starts[b]
        last = index.row_starts[b + 1] if b + 1 < len(frames) else len(rows)
        block = decompress(frame)
        assert block == block_of(encoded[first:last])
        if b + 1 < len(frames):
            assert len(block) >= block_size
        if last - first > 1:
            assert len(block) - len(encoded[last - 1]) - 4 < block_size


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(files(arrow=True))
def test_arrow_batches_round_trip_to_the_same_bytes(case: tuple[RowType, list[Any], int]) -> None:
    rtype, rows, block_size = case
    data = write(rtype, rows, block_size)
    batches = list(reader(data, rtype).read_batches(batch_rows=7))
    assert all(b.num_rows == 7 for b in batches[:-1]) and sum(b.num_rows for b in batches) == len(rows)
    sink = io.BytesIO()
    writer = RowFileWriter(sink, rtype, block_size_bytes=block_size)
    for batch in batches:
        writer.write_batch(batch)
    writer.close()
    assert sink.getvalue() == data


def test_empty_file_reads_nothing() -> None:
    data = write(SIMPLE, [])
    r = reader(data, SIMPLE)
    assert (r.row_count, r.block_count, list(r.read_batches())) == (0, 0, [])
    with pytest.raises(IndexError):
        r.read_row(0)


def test_rows_larger_than_a_block_get_one_block_each() -> None:
    rows = [(i, "x" * 500, 0.0) for i in range(3)]
    _, index, _ = split(write(SIMPLE, rows, block_size=100))
    assert index.row_starts == (0, 1, 2)


# ---------------------------------------------------------------- random access

class CountingSource(io.BytesIO):
    reads = 0

    def read(self, size: int | None = -1, /) -> bytes:
        self.reads += 1
        return super().read(size)


MANY = [(i, f"row {i} " * (i % 5), i / 3) for i in range(2000)]


def test_a_lookup_reads_and_decompresses_exactly_one_block() -> None:
    data = write(SIMPLE, MANY, block_size=1024)
    source = CountingSource(data)
    r = reader(data, SIMPLE, source)
    assert r.block_count > 50
    opened = source.reads
    assert r.read_row(1234) == MANY[1234]
    assert (source.reads - opened, r.blocks_read, r.blocks_decompressed) == (1, 1, 1)
    assert r.read_row(1235) == MANY[1235]  # same block: kept
    assert (r.blocks_read, r.blocks_decompressed) == (1, 1)
    assert r.read_row(7) == MANY[7]
    assert (source.reads - opened, r.blocks_read, r.blocks_decompressed) == (2, 2, 2)
    with pytest.raises(IndexError):
        r.read_row(len(MANY))
    with pytest.raises(IndexError):
        r.read_row(-1)


@given(st.sets(st.integers(0, 2100), max_size=40))
def test_selections_decompress_only_the_blocks_they_touch(rows: set[int]) -> None:
    data = write(SIMPLE, MANY, block_size=1024)
    r = reader(data, SIMPLE)
    _, index, _ = split(data)
    selected = sorted(x for x in rows if x < len(MANY))
    touched = {max(b for b, s in enumerate(index.row_starts) if s <= x) for x in selected}
    batches = list(r.read_batches(selection=BitMap(rows)))
    assert r.blocks_decompressed == r.blocks_read == len(touched)
    assert [row for b in batches for row in b.to_pylist()] == [
        dict(zip(["id", "name", "score"], MANY[x], strict=True)) for x in selected]


def test_projection_returns_the_chosen_columns_in_order() -> None:
    data = write(SIMPLE, MANY, block_size=4096)
    batches = list(reader(data, SIMPLE).read_batches(projection=[2, 0], batch_rows=500))
    assert [b.num_rows for b in batches] == [500] * 4
    assert batches[0].schema.names == ["score", "id"]
    assert batches[0].schema.field("id").metadata == {b"PARQUET:field_id": b"0"}
    table = pa.Table.from_batches(batches)
    assert table["id"].to_pylist() == list(range(2000))
    assert table["score"].to_pylist() == [r[2] for r in MANY]
    assert pa.Table.from_batches(list(reader(data, SIMPLE).read_batches(projection=[]))).num_rows \
        == 2000
    with pytest.raises(IndexError):
        list(reader(data, SIMPLE).read_batches(projection=[3]))


def test_types_without_arrow_or_python_values_are_unsupported() -> None:
    vector = row_type(("id", IntType()), ("v", VectorType(element=FloatType(), length=2)))
    data = write(vector, [(1, [0.5, 2.0])])
    r = reader(data, vector)
    assert r.read_row(0) == (1, [0.5, 2.0])
    with pytest.raises(UnsupportedError):
        r.read_batches()  # raised at the call, before any I/O
    assert r.blocks_read == 1
    assert pa.Table.from_batches(list(r.read_batches(projection=[0]))).to_pylist() == [{"id": 1}]
    with pytest.raises(UnsupportedError, match=PATH):
        reader(data, row_type(("id", IntType()), ("v", VariantType())))


# ---------------------------------------------------------------- writer API

def test_writer_counts_and_estimates_its_size() -> None:
    sink = io.BytesIO()
    writer = RowFileWriter(sink, SIMPLE, block_size_bytes=1000)
    assert (writer.bytes_written, writer.row_count) == (0, 0)
    writer.write_rows([(1, "a", 1.0)])
    assert writer.bytes_written == len(encode_row((1, "a", 1.0), SIMPLE)) + 8
    writer.write_rows(MANY[:200])
    assert writer.row_count == 201
    assert len(sink.getvalue()) < writer.bytes_written < len(sink.getvalue()) + 1000 + 8
    writer.close()
    assert writer.bytes_written == len(sink.getvalue())
    with pytest.raises(ValueError, match="closed"):
        writer.write_rows([(1, "a", 1.0)])
    with pytest.raises(ValueError, match="closed"):
        writer.close()


def test_a_bad_row_is_rejected_whole() -> None:
    sink = io.BytesIO()
    writer = RowFileWriter(sink, SIMPLE)
    with pytest.raises(TypeError):
        writer.write_rows([(1, "a", 1.0), (2, b"not a str", 2.0)])
    writer.write_rows([(3, "c", 3.0)])
    writer.close()
    assert [reader(sink.getvalue(), SIMPLE).read_row(i) for i in range(2)] == [(1, "a", 1.0),
                                                                               (3, "c", 3.0)]


def test_batches_are_cast_to_the_row_type_or_rejected() -> None:
    rtype = row_type(("id", BigIntType()), ("d", DecimalType(precision=20, scale=2)))
    sink = io.BytesIO()
    writer = RowFileWriter(sink, rtype)
    writer.write_batch(pa.table({"a": pa.array([1], pa.int8()),
                                 "b": pa.array([Decimal("1.5")], pa.decimal128(5, 1))}))
    with pytest.raises(ValueError, match="columns"):
        writer.write_batch(pa.table({"a": [1]}))
    with pytest.raises(TypeError, match="column id"):
        writer.write_batch(pa.table({"a": ["x"], "b": [None]}))
    writer.close()
    assert reader(sink.getvalue(), rtype).read_row(0) == (1, Decimal("1.50"))


def test_bad_writer_options_are_rejected_and_levels_apply() -> None:
    with pytest.raises(ValueError):
        RowFileWriter(io.BytesIO(), SIMPLE, block_size_bytes=0)
    with pytest.raises(ValueError):
        RowFileWriter(io.BytesIO(), SIMPLE, zstd_level=23)
    rows = MANY[:500]
    level9 = write(SIMPLE, rows, level=9)
    assert level9 != write(SIMPLE, rows) and len(level9) < len(write(SIMPLE, rows))
    assert reader(level9, SIMPLE).read_row(499) == rows[499]


# ---------------------------------------------------------------- corrupt files

INT_ROW = row_type(("i", IntType()))
STR_ROW = row_type(("s", VarCharType(length=MAX_LENGTH)))
ONE = encode_row((1,), INT_ROW)
VALID = write(INT_ROW, [(1,), (2,), (3,)], block_size=20)  # blocks of 2 and 1 rows


def _patch(data: bytes, offset: int, new: bytes) -> bytes:
    offset %= len(data)
    return data[:offset] + new + data[offset + len(new):]


def _footer_with(**changes: int) -> bytes:
    footer = decode_footer(VALID[-FOOTER_SIZE:])
    fields = {f: getattr(footer, f) for f in ("total_row_count", "block_count", "index_offset",
                                               "index_length", "version")} | changes
    return VALID[:-FOOTER_SIZE] + struct.pack("<qiqiB3xI", *fields.values(), 0x524F5753)


def _index_patched(new: bytes) -> bytes:
    return _patch(VALID, decode_footer(VALID[-FOOTER_SIZE:]).index_offset, new)


CORRUPT = {
    "shorter than the footer": VALID[-20:],
    "bad magic": _patch(VALID, -4, b"ROWS"),
    "unsupported version": _footer_with(version=2),
    "index past the footer": _footer_with(index_length=50),
    "negative index offset": _footer_with(index_offset=-1),
    "negative rows": _footer_with(total_row_count=-1),
    "index array past the index": _index_patched(b"\x7f"),
    "index array length is a bad varint": _index_patched(b"\xff\xff\xff\xff\xff"),
    "truncated index": _footer_with(index_length=decode_footer(VALID[-FOOTER_SIZE:]).index_length - 1),
    "block count disagrees": _footer_with(block_count=3),
    "row count disagrees": _footer_with(total_row_count=2),
    "row starts not increasing": assemble([block_of([ONE]), block_of([ONE])], [0, 0], 2),
    "first row start not 0": assemble([block_of([ONE])], [1], 2),
    "blocks overlap the index": assemble([block_of([ONE])], [0], 1, compressed=[100]),
    "zero compressed size": assemble([block_of([ONE])], [0], 1, compressed=[0]),
    "not zstd": assemble([], [0], 1, frames=[b"garbage!"], uncompressed=[9]),
    "uncompressed size too low": assemble([block_of([ONE, ONE])], [0], 2, uncompressed=[20]),
    "uncompressed size too high": assemble([block_of([ONE, ONE])], [0], 2, uncompressed=[30]),
    "uncompressed size too small": assemble([block_of([ONE])], [0], 1, uncompressed=[4]),
    "block row count lies": assemble([block_of([ONE, ONE], count=3)], [0], 2),
    "row offset past the rows": assemble([block_of([ONE, ONE], offsets=[0, 40])], [0], 2),
    "negative row offset": assemble([block_of([ONE, ONE], offsets=[-4, 5])], [0], 2),
    "row bytes left over": assemble([block_of([ONE + b"\0", ONE], offsets=[0, 6])], [0], 2),
    "row overruns the next": assemble([block_of([ONE, ONE], offsets=[0, 3])], [0], 2),
    "content size lies": assemble([], [0], 1, frames=[
        zstandard.ZstdCompressor().compress(block_of([ONE]) + b"\0")], uncompressed=[13]),
    "trailing bytes after the frame": assemble([], [0], 1, frames=[
        zstandard.ZstdCompressor().compress(block_of([ONE])) + b"\0"], uncompressed=[13]),
}
STRING_CORRUPT = {
    "length of 2^31 - 1": assemble([block_of([b"\x00\xff\xff\xff\xff\x07"])], [0], 1),
    "varint into the offsets": assemble([block_of([b"\x00\x80"])], [0], 1),
    "string past the block": assemble([block_of([b"\x00\x7fab"])], [0], 1),
    "invalid UTF-8 for Arrow": assemble([block_of([b"\x00\x02\xc3\x28"])], [0], 1),
}


def _read_everything(data: bytes, rtype: RowType, file_size: int | None = None) -> list[Any]:
    r = RowFileReader(io.BytesIO(data), rtype, path=PATH, file_size=file_size)
    rows = [r.read_row(i) for i in range(r.row_count)]
    batches = [b.to_pylist() for b in r.read_batches()]
    return [rows, batches]


@pytest.mark.parametrize("case", sorted(CORRUPT) + sorted(STRING_CORRUPT))
def test_corrupt_files_raise_corrupt_file_error_naming_the_file(case: str) -> None:
    data, rtype = (CORRUPT[case], INT_ROW) if case in CORRUPT else (STRING_CORRUPT[case], STR_ROW)
    with pytest.raises(CorruptFileError) as raised:
        _read_everything(data, rtype)
    assert raised.value.path == PATH and PATH in str(raised.value)


@pytest.mark.parametrize("rtype", [row_type(("d", DecimalType(precision=4, scale=2))),
                                   row_type(("d", ArrayType(element=DecimalType(precision=4,
                                                                                scale=2))))])
def test_decimals_beyond_their_precision_are_corrupt(rtype: RowType) -> None:
    """The Arrow path keeps compact decimals unscaled and checks them per column."""
    value = struct.pack("<q", 10_000)
    row = value if isinstance(rtype.fields[0].type, DecimalType) else b"\x01\x00" + value
    data = assemble([block_of([b"\x00" + row])], [0], 1)
    r = reader(data, rtype)
    with pytest.raises(CorruptFileError, match="10000"):
        r.read_row(0)
    with pytest.raises(CorruptFileError, match="precision"):
        list(r.read_batches())


def test_a_file_shorter_than_its_stated_size_is_corrupt() -> None:
    with pytest.raises(CorruptFileError, match="truncated"):
        _read_everything(VALID, INT_ROW, file_size=len(VALID) + 10)


def test_valid_assembled_and_string_files_read() -> None:
    assert _read_everything(assemble([block_of([ONE, ONE])], [0], 2), INT_ROW)[0] == [(1,), (1,)]
    assert _read_everything(assemble([block_of([b"\x00\x02ok"])], [0], 1), STR_ROW)[0] == [("ok",)]


def test_reserved_footer_bytes_are_ignored_like_java() -> None:
    assert _read_everything(_patch(VALID, -7, b"\x01\x02\x03"), INT_ROW) == \
        _read_everything(VALID, INT_ROW)


FUZZ_TYPE = row_type(("id", BigIntType()), ("name", VarCharType(length=MAX_LENGTH)),
                     ("d", DecimalType(precision=20, scale=2)), ("a", ArrayType(element=IntType())),
                     ("m", MapType(key=VarCharType(length=5), value=IntType())))
FUZZ_ROWS = [(i, None if i % 4 == 0 else f"v{i}", Decimal(i) / 4, [i, None] if i % 3 else None,
              [("k", i)] if i % 2 else []) for i in range(40)]
FUZZ_FILE = write(FUZZ_TYPE, FUZZ_ROWS, block_size=200)


@settings(max_examples=1000)
@given(st.lists(st.tuples(st.integers(0, len(FUZZ_FILE) - 1), st.integers(1, 255)),
                min_size=1, max_size=4),
       st.integers(0, len(FUZZ_FILE)))
def test_damaged_files_raise_only_corrupt_file_error(flips: list[tuple[int, int]], keep: int) -> None:
    data = bytearray(FUZZ_FILE)
    for position, mask in flips:
        data[position] ^= mask
    for damaged in (bytes(data), FUZZ_FILE[:keep] if keep < len(FUZZ_FILE) else bytes(data)):
        try:
            rows, batches = _read_everything(damaged, FUZZ_TYPE)
        except CorruptFileError as exc:
            assert exc.path == PATH
        else:
            assert len(rows) == sum(len(b) for b in batches)
