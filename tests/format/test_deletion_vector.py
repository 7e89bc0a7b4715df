"""Deletion-vector index files: byte identity with Java's golden files, hypothesis round trips
of both record layouts, corrupt files that raise CodecError (never another exception), and
interop with pypaimon both ways (pypaimon reads paimond's files; paimond reads the DV files a
pypaimon table wrote, range by range, exactly as pypaimon does)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap, BitMap64

from paimond.errors import CodecError
from paimond.format.binary.java_order import java_hashmap_order, java_string_hash
from paimond.format.meta.deletion_vector import (
    MAX_POSITION_32,
    MAX_POSITION_64,
    decode_deletion_vector,
    decode_deletion_vector_file,
    decode_deletion_vector_range,
    decode_deletion_vector_records,
    encode_deletion_vector,
    encode_deletion_vector_file,
)
from paimond.format.meta.index_manifest import DeletionVectorMeta, decode_index_manifest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "java"  # tests/golden: copied in
DV_DIR = GOLDEN / "deletionvectors"

# MANIFEST.md section 2: the writer's inputs.
POSITIONS = {
    "data-a.parquet": [0, 5, 100, 101, 102, 103, 4095, 65535],
    "data-b.parquet": list(range(1000)),
    "data-c.parquet": [65536, 65537, 131072, *range(200000, 230000, 3), 2147483647],
    "data-big.parquet": [3, 4294967295, 4294967296, 4294967297, 8589934597, 1099511627776],
}
GOLDEN_FILES = {
    "dv32_three_files": (("data-a.parquet", "data-b.parquet", "data-c.parquet"), False),
    "dv64_three_files": (("data-a.parquet", "data-b.parquet", "data-c.parquet"), True),
    "dv64_big_positions": (("data-big.parquet",), True),
    "dv32_single": (("data-a.parquet",), False),
    "dv64_single": (("data-a.parquet",), True),
    "dv_empty": ((), False),
}


def golden_dv_entries() -> dict[str, dict[str, Any]]:
    """index.json entries of deletionvectors/, skipping locally (failing under CI) when absent."""
    if not DV_DIR.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"golden vectors missing at {DV_DIR}")
        pytest.skip(f"golden vectors missing at {DV_DIR}")
    entries = json.loads((GOLDEN / "index.json").read_text())
    return {e["file"]: e for e in entries if e["file"].startswith("deletionvectors/")}


def _vectors(names: tuple[str, ...], bitmap64: bool) -> dict[str, BitMap | BitMap64]:
    return {n: BitMap64(POSITIONS[n]) if bitmap64 else BitMap(POSITIONS[n]) for n in names}


# ------------------------------------------------------------------------ golden files


@pytest.mark.parametrize("name", sorted(GOLDEN_FILES))
def test_golden_files_are_written_byte_identical(name: str) -> None:
    entry = golden_dv_entries()[f"deletionvectors/{name}.index"]
    names, bitmap64 = GOLDEN_FILES[name]
    data, ranges = encode_deletion_vector_file(_vectors(names, bitmap64), bitmap64=bitmap64)
    assert data == (DV_DIR / f"{name}.index").read_bytes()
    assert [(r.data_file_name, r.offset, r.length, r.cardinality) for r in ranges] == [
        (r["data_file"], r["offset"], r["length"], r["cardinality"])
        for r in entry["dv_ranges_in_file_order"]]
    assert len(data) == entry["index_file_meta"]["file_size"]


@pytest.mark.parametrize("name", sorted(GOLDEN_FILES))
def test_golden_files_decode_to_their_inputs(name: str) -> None:
    entry = golden_dv_entries()[f"deletionvectors/{name}.index"]
    data = (DV_DIR / f"{name}.index").read_bytes()
    ranges = [DeletionVectorMeta(r["data_file"], r["offset"], r["length"], r["cardinality"])
              for r in entry["dv_ranges_in_file_order"]]
    names, bitmap64 = GOLDEN_FILES[name]
    vectors = decode_deletion_vector_file(data, ranges)
    assert {n: list(v) for n, v in vectors.items()} == {n: POSITIONS[n] for n in names}
    assert all(isinstance(v, BitMap64 if bitmap64 else BitMap) for v in vectors.values())
    walked = decode_deletion_vector_records(data)
    assert [(o, n, list(v)) for o, n, v in walked] == [
        (r.offset, r.length, POSITIONS[r.data_file_name]) for r in ranges]


def test_64_bit_layout_writes_every_key_up_to_the_highest() -> None:
    record = encode_deletion_vector(BitMap64([5 << 32]), bitmap64=True)
    (count,) = struct.unpack_from("<q", record, 8)
    assert count == 6
    assert len(record) == 4 + 4 + 8 + 6 * (4 + 8) + 10 + 4  # 5 empty bitmaps, one array of 1
    assert list(decode_deletion_vector(record, len(record))) == [5 << 32]
    assert list(decode_deletion_vector_range(b"\x01" + record, 1, len(record))) == [5 << 32]


def test_a_32_bit_bitmap_goes_into_the_64_bit_layout_as_key_zero() -> None:
    record = encode_deletion_vector(BitMap([1, 2, 3]), bitmap64=True)
    assert record == encode_deletion_vector(BitMap64([1, 2, 3]), bitmap64=True)
    assert encode_deletion_vector(BitMap(), bitmap64=True)[16:-4] == b""  # no bitmap at all


def test_positions_beyond_the_layout_are_refused() -> None:
    with pytest.raises(ValueError, match="64-bit layout"):
        encode_deletion_vector(BitMap([MAX_POSITION_32 + 1]))
    with pytest.raises(ValueError):
        encode_deletion_vector(BitMap64([MAX_POSITION_64 + 1]), bitmap64=True)
    assert encode_deletion_vector(BitMap([MAX_POSITION_32]))


# ------------------------------------------------------------------- hypothesis round trips

_NAMES = st.text(min_size=1, max_size=12)
_RUN = st.tuples(st.integers(0, MAX_POSITION_32 - 5000), st.integers(1, 5000))


@st.composite
def _positions_32(draw: st.DrawFn) -> BitMap:
    bitmap = BitMap(draw(st.lists(st.integers(0, MAX_POSITION_32), max_size=40)))
    for start, length in draw(st.lists(_RUN, max_size=3)):
        bitmap.add_range(start, start + length)
    return bitmap


@st.composite
def _positions_64(draw: st.DrawFn) -> BitMap64:
    lows = st.integers(0, 2**32 - 1)
    positions = draw(st.lists(st.builds(lambda h, lo: (h << 32) | lo, st.integers(0, 40), lows),
                              max_size=40))
    bitmap = BitMap64(positions)
    if draw(st.booleans()):  # a rare far key: the record holds (key + 1) bitmaps
        bitmap.add((draw(st.integers(41, 300)) << 32) | draw(lows))
    return bitmap


@settings(max_examples=40)
@given(st.dictionaries(_NAMES, _positions_32(), max_size=6), st.booleans())
def test_32_bit_files_round_trip(vectors: dict[str, BitMap], java_order: bool) -> None:
    data, ranges = encode_deletion_vector_file(vectors, java_order=java_order)
    expected_order = (java_hashmap_order(vectors, java_string_hash) if java_order
                      else list(vectors))
    assert [r.data_file_name for r in ranges] == expected_order
    assert decode_deletion_vector_file(data, ranges) == vectors
    assert [r.cardinality for r in ranges] == [len(vectors[n]) for n in expected_order]
    walked = decode_deletion_vector_records(data)
    assert [(o, n) for o, n, _ in walked] == [(r.offset, r.length) for r in ranges]
    assert [v for _, _, v in walked] == [vectors[n] for n in expected_order]
    starts = [1] + [r.offset + r.length + 8 for r in ranges]  # 32-bit: length excludes 8 bytes
    assert starts == [r.offset for r in ranges] + [len(data)]
    for r in ranges:  # a ranged read of one record
        record = data[r.offset:r.offset + r.length + 8]
        assert decode_deletion_vector(record, r.length) == vectors[r.data_file_name]


@settings(max_examples=30)
@given(st.dictionaries(_NAMES, _positions_64(), max_size=4))
def test_64_bit_files_round_trip(vectors: dict[str, BitMap64]) -> None:
    data, ranges = encode_deletion_vector_file(vectors, bitmap64=True)
    assert decode_deletion_vector_file(data, ranges) == vectors
    starts = [1] + [r.offset + r.length for r in ranges]  # 64-bit: length is the whole record
    assert starts == [r.offset for r in ranges] + [len(data)]
    for r in ranges:
        assert decode_deletion_vector_range(data, r.offset, r.length) == vectors[r.data_file_name]
        record = data[r.offset:r.offset + r.length]  # a ranged read of one record
        assert decode_deletion_vector(record, r.length) == vectors[r.data_file_name]


@settings(max_examples=30)
@given(_positions_32())
def test_records_are_run_optimized(positions: BitMap) -> None:
    record = encode_deletion_vector(positions)
    optimized = BitMap(positions)
    optimized.run_optimize()
    assert record[8:-4] == optimized.serialize()
    assert positions == BitMap(positions)  # the caller's bitmap is left as it was


# ------------------------------------------------------------------------------ corruption


def _sample_file(bitmap64: bool) -> tuple[bytes, tuple[DeletionVectorMeta, ...]]:
    names = ("data-a.parquet", "data-b.parquet", "data-big.parquet" if bitmap64 else "x")
    vectors = {n: POSITIONS.get(n, [7, 8, 9]) for n in names}
    return encode_deletion_vector_file(
        {n: BitMap64(p) if bitmap64 else BitMap(p) for n, p in vectors.items()},
        bitmap64=bitmap64)


@settings(max_examples=60)
@given(st.booleans(), st.data())
def test_truncated_files_raise_codec_error(bitmap64: bool, data: st.DataObject) -> None:
    content, ranges = _sample_file(bitmap64)
    cut = data.draw(st.integers(0, len(content) - 1))
    with pytest.raises(CodecError):
        decode_deletion_vector_file(content[:cut], ranges)


@settings(max_examples=100)
@given(st.booleans(), st.data())
def test_any_flipped_bit_raises_codec_error(bitmap64: bool, data: st.DataObject) -> None:
    content, ranges = _sample_file(bitmap64)
    bit = data.draw(st.integers(0, 8 * len(content) - 1))
    flipped = bytearray(content)
    flipped[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(CodecError):
        decode_deletion_vector_file(bytes(flipped), ranges)


@settings(max_examples=100)
@given(st.binary(max_size=200), st.integers(-2, 60), st.integers(-2, 80))
def test_arbitrary_bytes_raise_only_codec_error(content: bytes, offset: int, length: int) -> None:
    for attempt in (lambda: decode_deletion_vector_records(content),
                    lambda: decode_deletion_vector(content),
                    lambda: decode_deletion_vector(content, length),
                    lambda: decode_deletion_vector_range(content, offset, length),
                    lambda: decode_deletion_vector_range(b"\x01" + content, offset, length)):
        try:
            attempt()
        except CodecError:
            pass


def test_codec_errors_name_the_problem() -> None:
    content, ranges = _sample_file(False)
    with pytest.raises(CodecError, match="no version byte"):
        decode_deletion_vector_records(b"")
    with pytest.raises(CodecError, match="unknown deletion vector file version 2"):
        decode_deletion_vector_file(b"\x02" + content[1:], ranges)
    with pytest.raises(CodecError, match="bad deletion vector magic"):
        decode_deletion_vector_file(content[:5] + b"\x00" + content[6:], ranges)
    with pytest.raises(CodecError, match="CRC mismatch"):
        decode_deletion_vector_file(content[:-1] + bytes([content[-1] ^ 1]), ranges)
    with pytest.raises(CodecError, match="index manifest says"):
        decode_deletion_vector_range(content, ranges[0].offset, ranges[0].length + 1)
    with pytest.raises(CodecError, match="truncated"):
        decode_deletion_vector_file(content[:20], ranges)
    assert decode_deletion_vector_file(b"\x01", []) == {}
    assert decode_deletion_vector_records(b"\x01") == []


# ------------------------------------------------------------------------ pypaimon interop


def test_pypaimon_reads_paimond_files(tmp_path: Path) -> None:
    from pypaimon.common.file_io import FileIO
    from pypaimon.deletionvectors.deletion_vector import DeletionVector
    from pypaimon.table.source.deletion_file import DeletionFile

    vectors = {n: BitMap(POSITIONS[n]) for n in ("data-a.parquet", "data-b.parquet",
                                                 "data-c.parquet")}
    vectors["empty.parquet"] = BitMap()
    data, ranges = encode_deletion_vector_file(vectors)
    path = tmp_path / "index-dv-0"
    path.write_bytes(data)
    file_io = FileIO.get(str(path))
    for r in ranges:
        read = DeletionVector.read(file_io, DeletionFile(str(path), r.offset, r.length,
                                                         r.cardinality))
        assert list(read.bit_map()) == list(vectors[r.data_file_name])
        assert read.get_cardinality() == r.cardinality


def test_paimond_reads_pypaimon_tables_dv_files(tmp_path: Path) -> None:
    from pypaimon.common.file_io import FileIO
    from pypaimon.deletionvectors.deletion_vector import DeletionVector
    from pypaimon.table.source.deletion_file import DeletionFile
    from support.pypaimon_tables import build_append_deletion_vectors

    warehouse = tmp_path / "wh"
    build_append_deletion_vectors(str(warehouse))
    table = warehouse / "db.db" / "append_deletion_vectors"
    checked = 0
    for manifest in sorted((table / "manifest").glob("index-manifest-*")):
        for entry in decode_index_manifest(manifest.read_bytes()):
            index_file = entry.index_file
            if index_file.index_type != "DELETION_VECTORS":
                continue
            path = table / "index" / index_file.file_name
            data = path.read_bytes()
            ranges = index_file.dv_ranges or ()
            assert len(data) == index_file.file_size and len(ranges) == index_file.row_count
            ours = decode_deletion_vector_file(data, ranges)
            file_io = FileIO.get(str(path))
            for r in ranges:
                theirs = DeletionVector.read(file_io, DeletionFile(str(path), r.offset, r.length,
                                                                   r.cardinality))
                assert list(ours[r.data_file_name]) == list(theirs.bit_map())
                assert len(ours[r.data_file_name]) == r.cardinality
                checked += 1
            # pypaimon writes by name and without run containers; small scattered positions
            # make no runs, so paimond writes the same bytes in the same order.
            again, again_ranges = encode_deletion_vector_file(ours, java_order=False)
            assert again == data and again_ranges == tuple(ranges)
    assert checked >= 2
