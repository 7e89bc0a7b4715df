"""Parquet reads by row group: small groups decoded whole and cut into batches, large ones
streamed, give the rows pyarrow's own reader gives, in order, in batches of at most
``batch_rows`` rows; a column the file lacks reads as null. A footer kept for a file that is
read again is not read again, and footers are kept only within their bound."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from paimond.format.types.data_types import BigIntType, DataField, DoubleType, RowType, VarCharType
from paimond.table.data_files import parquet_groups
from paimond.table.data_files.kv_layout import physical_arrow_schema
from paimond.table.data_files.parquet_groups import EAGER_BATCHES, read_parquet_batches

STRING = VarCharType(length=2147483647)
COLUMNS = RowType(fields=(DataField(0, "k", BigIntType()), DataField(1, "s", STRING),
                          DataField(2, "d", DoubleType()), DataField(3, "missing", BigIntType())))


def _file(group_rows: list[int], seed: int) -> tuple[bytes, pa.Table]:
    rng = random.Random(seed)
    rows = sum(group_rows)
    table = pa.table({
        "k": pa.array(sorted(rng.sample(range(10 * rows), rows)), pa.int64()),
        "s": pa.array([None if rng.random() < 0.2 else f"v{rng.randrange(50)}"
                       for _ in range(rows)], pa.string()),
        "d": pa.array([None if rng.random() < 0.1 else rng.random() for _ in range(rows)]),
    })
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, table.schema) as writer:
        offset = 0
        for count in group_rows:
            writer.write_table(table.slice(offset, count), row_group_size=count)
            offset += count
    return sink.getvalue(), table


@pytest.mark.parametrize("seed", range(4))
def test_small_and_large_row_groups_read_as_pyarrow_reads_them(seed: int) -> None:
    batch_rows = 50
    eager = EAGER_BATCHES * batch_rows
    groups = [eager, eager + 1, 7, 3 * eager, 1, batch_rows, batch_rows + 1]
    random.Random(seed).shuffle(groups)
    data, expected = _file(groups, seed)
    assert pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups == len(groups)

    batches = list(read_parquet_batches(io.BytesIO(data), COLUMNS, batch_rows))

    assert all(0 < b.num_rows <= batch_rows for b in batches)
    schema = physical_arrow_schema(COLUMNS)
    assert all(b.schema == schema for b in batches)
    got = pa.Table.from_batches(batches, schema=schema)
    assert got.num_rows == expected.num_rows
    for name in ("k", "s", "d"):
        assert got.column(name).to_pylist() == expected.column(name).to_pylist()
    assert got.column("missing").null_count == expected.num_rows


def test_projection_reads_only_the_columns_asked_for() -> None:
    data, expected = _file([120, 30], seed=9)
    columns = RowType(fields=(COLUMNS.fields[2], COLUMNS.fields[0]))

    got = pa.Table.from_batches(list(read_parquet_batches(io.BytesIO(data), columns, 64)))

    assert got.column_names == ["d", "k"]
    assert got.column("k").to_pylist() == expected.column("k").to_pylist()


def test_a_local_file_is_read_by_arrow_itself_and_closed(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    data, expected = _file([300, 40, 200], seed=3)
    path = tmp_path / "data.parquet"
    path.write_bytes(data)
    opened: list[pa.NativeFile] = []
    real_osfile = pa.OSFile

    def recording_osfile(name: str) -> pa.NativeFile:
        opened.append(real_osfile(name))
        return opened[-1]

    monkeypatch.setattr(pa, "OSFile", recording_osfile)
    with open(path, "rb") as source:
        got = pa.Table.from_batches(list(read_parquet_batches(source, COLUMNS, 64)))
        assert [f.closed for f in opened] == [True]  # read through Arrow's file, then closed

        early = read_parquet_batches(source, COLUMNS, 64)
        next(early)
        early.close()  # a merge that stops early (a failure) closes its runs
    assert [f.closed for f in opened] == [True, True]
    assert got.column("k").to_pylist() == expected.column("k").to_pylist()
    assert got.column("s").to_pylist() == expected.column("s").to_pylist()


def test_a_python_stream_is_read_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    data, expected = _file([100], seed=4)

    def no_osfile(name: str) -> pa.NativeFile:
        raise AssertionError(f"{name} is not a local file")

    monkeypatch.setattr(pa, "OSFile", no_osfile)
    got = pa.Table.from_batches(list(read_parquet_batches(io.BytesIO(data), COLUMNS, 64)))
    assert got.column("d").to_pylist() == expected.column("d").to_pylist()


def test_a_kept_footer_is_read_once_and_footers_are_kept_within_their_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data, expected = _file([120, 30], seed=4)
    footers: dict[str, pq.FileMetaData] = {}
    columns = RowType(fields=(COLUMNS.fields[0],))
    first = pa.Table.from_batches(list(read_parquet_batches(
        io.BytesIO(data), columns, 64, footers, "a.parquet")))
    assert list(footers) == ["a.parquet"] and footers["a.parquet"].num_row_groups == 2
    # read again, its footer is taken from what was kept, not from the file's end
    truncated = data[:-8] + b"\0" * 8  # a footer read from the file would not parse
    again = pa.Table.from_batches(list(read_parquet_batches(
        io.BytesIO(truncated), COLUMNS, 64, footers, "a.parquet")))
    assert again.column("k").equals(first.column("k"))
    assert again.column("s").to_pylist() == expected.column("s").to_pylist()
    with pytest.raises(Exception, match="[Pp]arquet|magic"):
        list(read_parquet_batches(io.BytesIO(truncated), COLUMNS, 64))
    monkeypatch.setattr(parquet_groups, "KEPT_FOOTER_CHUNKS", 3 * 2)  # a footer: 3 columns x 2
    list(read_parquet_batches(io.BytesIO(data), columns, 64, footers, "b.parquet"))
    assert list(footers) == ["a.parquet"]  # b's would pass the bound
