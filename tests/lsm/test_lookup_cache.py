"""The key-lookup cache: same answers as reading the data file, cold, warm and corrupted;
bounded by its budget; cache files that fail validation are discarded and rebuilt."""

from __future__ import annotations

import os
import struct
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from paimond.errors import CodecError
from paimond.format.binary.binary_row import encode_manifest_row
from paimond.format.fory_row import encode_row
from paimond.format.fory_row.columnar import decode_flat_rows, encode_flat_rows, fixed_columns
from paimond.format.meta.manifest import EMPTY_STATS, DataFileMeta
from paimond.lsm.lookup.key_lookup import POSITION_COLUMN, WANTED_COLUMN, ScanKeyIndex
from paimond.lsm.lookup.lookup_cache import CachedKeyIndex, LookupCache

INT_KEYS = pa.schema([pa.field("_KEY_id", pa.int64(), False)])
MIXED_KEYS = pa.schema([pa.field("_KEY_dt", pa.string(), False),
                        pa.field("_KEY_id", pa.int32(), False)])


def _meta(name: str, rows: int) -> DataFileMeta:
    row = encode_manifest_row([], [])
    return DataFileMeta(
        file_name=name, file_size=rows * 10 + 1, row_count=rows, min_key=row, max_key=row,
        key_stats=EMPTY_STATS, value_stats=EMPTY_STATS, min_sequence_number=0,
        max_sequence_number=0, schema_id=0, level=5, extra_files=(), creation_time_millis=0,
        delete_row_count=0, embedded_index=None, file_source=1, value_stats_cols=None,
        external_path=None, first_row_id=None, write_cols=None, write_cols_sequences=None)


class _Files:
    """Data files as key tables, counting the reads that reach them."""

    def __init__(self, tables: dict[str, pa.Table]) -> None:
        self.tables, self.reads = tables, 0

    def read(self, meta: DataFileMeta) -> Iterator[pa.RecordBatch]:
        self.reads += 1
        yield from self.tables[meta.file_name].to_batches(max_chunksize=1000)


def _as_set(matches: pa.Table) -> set[tuple[int, int]]:
    return set(zip(matches.column(POSITION_COLUMN).to_pylist(),
                   matches.column(WANTED_COLUMN).to_pylist(), strict=True))


def _int_file(values: list[int]) -> pa.Table:
    return pa.table({"_KEY_id": pa.array(sorted(set(values)), pa.int64())})


def _mixed_file(values: list[tuple[str, int]]) -> pa.Table:
    keys = sorted(set(values))
    return pa.table({"_KEY_dt": pa.array([k[0] for k in keys], pa.string()),
                     "_KEY_id": pa.array([k[1] for k in keys], pa.int32())})


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(stored=st.lists(st.integers(-2**62, 2**62), min_size=1, max_size=200),
       probes=st.lists(st.integers(-2**62, 2**62), max_size=50), data=st.data())
def test_cached_int_keys_answer_like_the_data_file(tmp_path: Path, stored: list[int],
                                                   probes: list[int], data: st.DataObject) -> None:
    table = _int_file(stored)
    probes = list(dict.fromkeys(probes + data.draw(st.lists(st.sampled_from(
        table.column(0).to_pylist()), max_size=20))))
    wanted = pa.table({"_KEY_id": pa.array(probes, pa.int64())})
    files = _Files({"f": table})
    meta = _meta("f", table.num_rows)
    expected = _as_set(ScanKeyIndex(files.read, ["_KEY_id"]).match(meta, wanted))
    cache = LookupCache(str(tmp_path / uuid.uuid4().hex), 1 << 24)  # one per example
    index = CachedKeyIndex(cache, "/t", files.read, ["_KEY_id"])
    assert _as_set(index.match(meta, wanted)) == expected  # cold
    reads = files.reads
    assert _as_set(index.match(meta, wanted)) == expected  # warm: no read
    assert files.reads == reads and cache.stats.hits == 1


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(stored=st.lists(st.tuples(st.text(max_size=6), st.integers(-2**31, 2**31 - 1)),
                       min_size=1, max_size=80),
       probes=st.lists(st.tuples(st.text(max_size=6), st.integers(-3, 3)), max_size=30),
       data=st.data())
def test_cached_string_keys_answer_like_the_data_file(
        tmp_path: Path, stored: list[tuple[str, int]], probes: list[tuple[str, int]],
        data: st.DataObject) -> None:
    table = _mixed_file(stored)
    existing = list(zip(*(c.to_pylist() for c in table.columns), strict=True))
    probes = list(dict.fromkeys(probes + data.draw(st.lists(st.sampled_from(existing),
                                                            max_size=10))))
    wanted = pa.table({"_KEY_dt": pa.array([p[0] for p in probes], pa.string()),
                       "_KEY_id": pa.array([p[1] for p in probes], pa.int32())})
    files = _Files({"f": table})
    meta = _meta("f", table.num_rows)
    columns = ["_KEY_dt", "_KEY_id"]
    expected = _as_set(ScanKeyIndex(files.read, columns).match(meta, wanted))
    cache = LookupCache(str(tmp_path / uuid.uuid4().hex), 1 << 24)
    index = CachedKeyIndex(cache, "/t", files.read, columns)
    assert _as_set(index.match(meta, wanted)) == expected
    assert _as_set(index.match(meta, wanted)) == expected
    assert cache.stats.hits == 1


def _corruptions(content: bytes) -> Iterator[tuple[str, bytes]]:
    yield "truncated", content[:len(content) // 2]
    yield "empty", b""
    for position in (0, 20, len(content) // 2, len(content) - 20, len(content) - 1):
        flipped = bytearray(content)
        flipped[position] ^= 0x10
        yield f"bit flip at {position}", bytes(flipped)
    yield "appended", content + b"\0" * 8


@pytest.mark.parametrize("schema", [INT_KEYS, MIXED_KEYS], ids=["int", "mixed"])
def test_corrupt_cache_files_are_discarded_and_rebuilt(tmp_path: Path, schema: pa.Schema) -> None:
    if schema is INT_KEYS:
        table = _int_file(list(range(0, 3000, 3)))
        wanted = pa.table({"_KEY_id": pa.array([3, 4, 2997, 9000], pa.int64())})
    else:
        table = _mixed_file([(d, i) for d in "ab" for i in range(500)])
        wanted = pa.table({"_KEY_dt": ["a", "b", "c"], "_KEY_id": pa.array([7, 499, 1],
                                                                              pa.int32())})
    columns = table.column_names
    files = _Files({"f": table})
    meta = _meta("f", table.num_rows)
    expected = _as_set(ScanKeyIndex(files.read, columns).match(meta, wanted))
    assert len(expected) == 2
    cache = LookupCache(str(tmp_path / "cache"), 1 << 24)
    index = CachedKeyIndex(cache, "/t", files.read, columns)
    assert _as_set(index.match(meta, wanted)) == expected
    path = cache.path_of("/t", "f")
    good = Path(path).read_bytes()
    for what, bad in _corruptions(good):
        Path(path).write_bytes(bad)
        discarded = cache.stats.discarded
        assert _as_set(index.match(meta, wanted)) == expected, what
        assert cache.stats.discarded == discarded + 1, what
        assert Path(path).read_bytes() == good, f"{what}: not rebuilt"


def test_a_row_that_does_not_decode_is_never_trusted(tmp_path: Path) -> None:
    """A string row whose slot points past the row, with a CRC that checks out (as a bug
    or a crafted file would have it): the lookup rebuilds instead of reading garbage."""
    table = _mixed_file([("a", i) for i in range(50)])
    files = _Files({"f": table})
    meta = _meta("f", table.num_rows)
    cache = LookupCache(str(tmp_path / "cache"), 1 << 24)
    index = CachedKeyIndex(cache, "/t", files.read, table.column_names)
    wanted = pa.table({"_KEY_dt": ["a"], "_KEY_id": pa.array([10], pa.int32())})
    expected = _as_set(index.match(meta, wanted))
    path = cache.path_of("/t", "f")
    content = bytearray(Path(path).read_bytes())
    body_end = len(content) - 16
    rows_start = body_end - sum(len(encode_row(["a", i, i], pa.schema(
        [*table.schema, pa.field(POSITION_COLUMN, pa.int64(), False)]))) for i in range(50))
    struct.pack_into("<Q", content, rows_start + 8, (999 << 32) | 5)  # first row's string slot
    struct.pack_into("<I", content, body_end, zlib.crc32(bytes(content[:body_end])))
    Path(path).write_bytes(bytes(content))
    probe = pa.table({"_KEY_dt": ["a"], "_KEY_id": pa.array([0], pa.int32())})
    assert _as_set(index.match(meta, probe)) == {(0, 0)}
    assert cache.stats.discarded >= 1
    assert _as_set(index.match(meta, wanted)) == expected


def test_the_cache_stays_within_its_budget_least_recently_used_first(tmp_path: Path) -> None:
    tables = {f"f{i}": _int_file(list(range(1000 * i, 1000 * i + 500))) for i in range(6)}
    files = _Files(tables)
    size = None
    directory = tmp_path / "cache"
    probe = pa.table({"_KEY_id": pa.array([1], pa.int64())})
    for name in ("f0", "f1"):
        cache = LookupCache(str(directory), 1 << 24)
        CachedKeyIndex(cache, "/t", files.read, ["_KEY_id"]).match(_meta(name, 500), probe)
        size = Path(cache.path_of("/t", name)).stat().st_size
    assert size is not None
    cache = LookupCache(str(directory), 3 * size)
    index = CachedKeyIndex(cache, "/t", files.read, ["_KEY_id"])
    f0 = cache.path_of("/t", "f0")
    os.utime(f0, ns=(1, os.stat(f0).st_mtime_ns))  # f0 least recently used
    for name in ("f2", "f3"):
        index.match(_meta(name, 500), probe)
    remaining = sorted(p.name.split("-", 1)[1] for p in directory.glob("*.keys"))
    assert remaining == ["f1.keys", "f2.keys", "f3.keys"]
    assert cache.stats.evicted == 1
    assert sum(p.stat().st_size for p in directory.glob("*.keys")) <= 3 * size


def test_columnar_rows_equal_the_row_writer() -> None:
    table = pa.table({"a": pa.array([1, -2, None, 2**40], pa.int64()),
                      "b": pa.array([-1, 5, 7, None], pa.int32()),
                      "s": pa.array(["x", None, "hello world!", ""], pa.string()),
                      "z": pa.array([True, False, None, True]),
                      "y": pa.array([b"\x00\xff", b"", None, b"12345678"], pa.binary())})
    data, offsets = encode_flat_rows(table)
    for i, row in enumerate(table.to_pylist()):
        assert data[offsets[i]:offsets[i + 1]].tobytes() == encode_row(list(row.values()),
                                                                        table.schema)
    fixed = table.select(["a", "b", "z"]).slice(0, 2)
    data, _ = encode_flat_rows(fixed)
    columns = fixed_columns(data, fixed.schema, 2)
    assert columns["a"].tolist() == [1, -2] and columns["b"].tolist() == [-1, 5]
    assert np.array_equal(columns["z"], [True, False])


def test_decoded_rows_are_kept_within_their_budget() -> None:
    from paimond.lsm.lookup.lookup_cache import _DecodedRows

    tables = [pa.table({"k": pa.array([f"{i}-{j}" for j in range(100)])}) for i in range(4)]
    size = tables[0].nbytes
    kept = _DecodedRows(max_bytes=2 * size + size // 2)
    for i, table in enumerate(tables[:2]):
        kept.put(("f", i, 0, 0), table)
    assert kept.get(("f", 0, 0, 0)) is tables[0]  # now the most recently used
    kept.put(("f", 2, 0, 0), tables[2])
    assert kept.get(("f", 1, 0, 0)) is None  # the least recently used went
    assert kept.get(("f", 0, 0, 0)) is tables[0] and kept.get(("f", 2, 0, 0)) is tables[2]
    kept.put(None, tables[3])  # rows not read from a file are not kept
    assert kept.get(None) is None


_FLAT_TYPES = {
    "i8": (pa.int8(), st.integers(-128, 127)), "i32": (pa.int32(), st.integers(-2**31, 2**31 - 1)),
    "i64": (pa.int64(), st.integers(-2**63, 2**63 - 1)), "bool": (pa.bool_(), st.booleans()),
    "str": (pa.string(), st.text(max_size=12)), "bin": (pa.binary(), st.binary(max_size=12))}


@st.composite
def flat_tables(draw: st.DrawFn) -> pa.Table:
    names = draw(st.lists(st.sampled_from(sorted(_FLAT_TYPES)), min_size=1, max_size=4))
    count = draw(st.integers(0, 20))
    columns = {}
    for i, name in enumerate(names):
        arrow_type, values = _FLAT_TYPES[name]
        columns[f"c{i}"] = pa.array(draw(st.lists(st.none() | values, min_size=count,
                                                   max_size=count)), arrow_type)
    return pa.table(columns)


@given(table=flat_tables())
def test_columnar_rows_round_trip(table: pa.Table) -> None:
    data, offsets = encode_flat_rows(table)
    for i, row in enumerate(table.to_pylist()):
        assert data[offsets[i]:offsets[i + 1]].tobytes() == encode_row(list(row.values()),
                                                                        table.schema)
    assert decode_flat_rows(data, offsets, table.schema).equals(table)


@given(table=flat_tables(), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)),
                                          min_size=1, max_size=4))
def test_damaged_columnar_rows_decode_or_raise_codec_error(
        table: pa.Table, flips: list[tuple[int, int]]) -> None:
    data, offsets = encode_flat_rows(table)
    damaged = data.copy()
    for position, bits in flips:
        if len(damaged):
            damaged[position % len(damaged)] ^= bits
    try:
        decoded = decode_flat_rows(damaged, offsets, table.schema)
    except CodecError:
        return
    assert decoded.num_rows == table.num_rows
