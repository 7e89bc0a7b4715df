""".row files against pypaimon 2.1.0 (`file.format=row`, append and primary-key tables).

- paimond reads every .row data file pypaimon wrote exactly as pypaimon's own
  `FormatRowReader` does, by scan and by row number;
- paimond, writing the same rows with the same options, produces the same uncompressed blocks
  and index arrays. The files still differ: pypaimon compresses each block with one-shot
  `ZstdCompressor.compress`, whose frame records the content size, while paimond streams like
  Java's `ZstdOutputStream` (byte-identical to Java's golden files, see test_row_file.py);
- pypaimon reads files paimond wrote, through `FormatRowReader` and as the data files of an
  append table committed with tests/table_append.py.

pypaimon also stores DECIMAL(p > 18) negative powers of two with an extra sign byte (-128 is
`ff80`, Java's `BigInteger.toByteArray` gives `80`); both read either form.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import random
import time
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
import zstandard
from pypaimon.read.reader.format_row_reader import FormatRowReader
from pypaimon.schema.data_types import AtomicType, DataField
from pypaimon.table.special_fields import SpecialFields
from pypaimon.write.writer.format_row_writer import FormatRowWriter
from support.pypaimon_oracle import live_files, read_rows
from support.pypaimon_tables import catalog_for, sort_rows
from support.row_file_parts import decompress, split
from support.table_append import append_files

from paimond.format.binary.binary_row import EMPTY_MANIFEST_ROW
from paimond.format.meta.manifest import EMPTY_STATS, DataFileMeta
from paimond.format.row_file.file import RowFileReader, RowFileWriter
from paimond.format.row_file.index import FOOTER_SIZE
from paimond.format.types.data_types import BigIntType, DecimalType, RowType, TinyIntType, row_type
from paimond.format.types.data_types import DataField as PaimondField
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("score", pa.float64()),
    ("flag", pa.bool_()), ("day", pa.date32()), ("ts", pa.timestamp("us")),
    ("d", pa.decimal128(18, 2)), ("big", pa.decimal128(30, 4)), ("tags", pa.list_(pa.string())),
    ("attrs", pa.map_(pa.string(), pa.int32())),
    ("point", pa.struct([("x", pa.int32()), ("label", pa.string())])),
])
TABLES = {"db.row_append": ((), {"bucket": "-1", "file.format": "row"}),
          "db.row_pk": (("id",), {"bucket": "2", "file.format": "row"})}


def _rows(rng: random.Random, start: int, count: int) -> list[dict[str, Any]]:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.2 else value

    return [{
        "id": i, "name": maybe(f"name-{i}" * rng.randrange(4)), "score": maybe(rng.random() * 1e6),
        "flag": maybe(rng.random() < 0.5), "day": maybe(dt.date(2024, 1, 1) + dt.timedelta(i)),
        "ts": maybe(dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i, microseconds=i * 7)),
        "d": maybe(Decimal(rng.randrange(-10**9, 10**9)) / 100),
        "big": maybe(Decimal(rng.randrange(-10**20, 10**20) * 2 + 1) / 10000),  # never -2^k
        "tags": maybe([maybe(f"t{j}") for j in range(rng.randrange(4))]),
        "attrs": maybe([(f"k{j}", maybe(j)) for j in range(rng.randrange(3))]),
        "point": maybe({"x": maybe(i), "label": maybe("p")}),
    } for i in range(start, start + count)]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> str:
    from pypaimon import Schema

    path = str(tmp_path_factory.mktemp("row_interop") / "wh")
    catalog = catalog_for(path)
    catalog.create_database("db", True)
    rng = random.Random(7)
    for name, (keys, options) in TABLES.items():
        catalog.create_table(name, Schema.from_pyarrow_schema(
            SCHEMA, primary_keys=list(keys), options=options), False)
        table = catalog.get_table(name)
        for start, count in ((0, 2500), (1500, 2000)):
            builder = table.new_batch_write_builder()
            write, commit = builder.new_write(), builder.new_commit()
            write.write_arrow(pa.Table.from_pylist(_rows(rng, start, count), schema=SCHEMA))
            commit.commit(write.prepare_commit())
            write.close()
            commit.close()
    return path


def _physical(warehouse: str, name: str) -> tuple[RowType, list[Any], Any]:
    """paimond's row type of the table's data files, pypaimon's fields of them, and its table."""
    table = catalog_for(warehouse).get_table(name)
    schema = open_table(open_storage(warehouse), warehouse, name).latest_schema()
    fields, pp_fields = list(schema.fields), list(table.table_schema.fields)
    if table.is_primary_key_table:
        keys = [f for f in schema.fields if f.name in schema.primary_keys]
        fields = [*(PaimondField(f.id + 1073741823, "_KEY_" + f.name, f.type) for f in keys),
                  PaimondField(2147483646, "_SEQUENCE_NUMBER", BigIntType(nullable=False)),
                  PaimondField(2147483645, "_VALUE_KIND", TinyIntType(nullable=False)), *fields]
        pp_keys = [f for f in table.table_schema.fields if f.name in table.primary_keys]
        pp_fields = [*(DataField(f.id, "_KEY_" + f.name, f.type) for f in pp_keys),
                     SpecialFields.SEQUENCE_NUMBER, SpecialFields.VALUE_KIND, *pp_fields]
    return RowType(fields=tuple(fields)), pp_fields, table


def _pypaimon_read(table: Any, path: str, fields: list[Any],
                   row_indices: list[int] | None = None) -> pa.Table:
    reader = FormatRowReader(table.file_io, path, [f.name for f in fields], fields, None,
                             batch_size=1024, row_indices=row_indices)
    batches = []
    while (batch := reader.read_arrow_batch()) is not None:
        batches.append(batch)
    return pa.Table.from_batches(batches)


def _data_files(warehouse: str, name: str) -> list[str]:
    snapshot = max(int(p.split("-")[1]) for p in os.listdir(
        os.path.join(warehouse, "db.db", name.split(".")[1], "snapshot")) if p.startswith("snapshot-"))
    paths = [f["path"] for f in live_files(warehouse, name, snapshot)]
    assert paths and all(p.endswith(".row") for p in paths)
    return paths


@pytest.mark.parametrize("name", sorted(TABLES))
def test_paimond_reads_pypaimon_row_files_like_pypaimon(warehouse: str, name: str) -> None:
    rtype, pp_fields, table = _physical(warehouse, name)
    for path in _data_files(warehouse, name):
        expected = _pypaimon_read(table, path, pp_fields)
        with open(path, "rb") as source:
            reader = RowFileReader(source, rtype, path=path)
            ours = pa.Table.from_batches(list(reader.read_batches(batch_rows=1000)))
            assert reader.row_count == expected.num_rows > 0
            assert ours.column_names == expected.column_names
            assert ours.to_pylist() == expected.to_pylist()
            picks = sorted(random.Random(path).sample(range(reader.row_count), 20))
            by_number = _pypaimon_read(table, path, pp_fields, row_indices=picks).to_pylist()
            assert [reader.read_row(i)[0] for i in picks] == [r[rtype.fields[0].name] for r in by_number]
            projected = reader.read_batches(projection=[len(rtype.fields) - 1, 0])
            assert pa.Table.from_batches(list(projected)).to_pylist() == \
                expected.select([rtype.fields[-1].name, rtype.fields[0].name]).to_pylist()


@pytest.mark.parametrize("name", sorted(TABLES))
def test_paimond_writes_pypaimons_blocks_but_streams_zstd_like_java(warehouse: str,
                                                                   name: str) -> None:
    rtype, _, _ = _physical(warehouse, name)
    for path in _data_files(warehouse, name):
        with open(path, "rb") as source:
            theirs = source.read()
        sink = io.BytesIO()
        writer = RowFileWriter(sink, rtype)  # pypaimon: 64 KiB blocks, file.compression.zstd-level 1
        for batch in RowFileReader(io.BytesIO(theirs), rtype, path=path).read_batches():
            writer.write_batch(batch)
        writer.close()
        ours = sink.getvalue()
        our_footer, our_index, our_frames = split(ours)
        footer, index, frames = split(theirs)
        assert (our_footer.total_row_count, our_footer.block_count) == \
            (footer.total_row_count, footer.block_count)
        assert (our_index.row_starts, our_index.uncompressed_sizes) == \
            (index.row_starts, index.uncompressed_sizes)
        blocks = [decompress(f) for f in frames]
        assert [decompress(f) for f in our_frames] == blocks
        # The only difference: pypaimon's one-shot frames, which carry the content size.
        assert frames == [zstandard.ZstdCompressor(level=1).compress(b) for b in blocks]
        assert all(zstandard.get_frame_parameters(f).content_size == len(b)
                   for f, b in zip(frames, blocks, strict=True))
        assert all(zstandard.get_frame_parameters(f).content_size == zstandard.CONTENTSIZE_UNKNOWN
                   for f in our_frames)
        assert ours[-FOOTER_SIZE:][24:] == theirs[-FOOTER_SIZE:][24:]  # version, reserved, magic


def test_pypaimon_row_reader_reads_paimond_files(warehouse: str, tmp_path: Any) -> None:
    rtype, pp_fields, table = _physical(warehouse, "db.row_append")
    rows = pa.Table.from_pylist(_rows(random.Random(3), 0, 3000), schema=SCHEMA)
    path = str(tmp_path / "paimond.row")
    with open(path, "wb") as sink:
        writer = RowFileWriter(sink, rtype, block_size_bytes=4096)
        writer.write_batch(rows)
        writer.close()
    theirs = _pypaimon_read(table, path, pp_fields)
    assert theirs.to_pylist() == rows.to_pylist()
    picks = [0, 1234, 2999]
    assert _pypaimon_read(table, path, pp_fields, picks).to_pylist() == \
        rows.take(picks).to_pylist()


def test_decimal_sign_bytes_differ_but_both_readers_agree(warehouse: str, tmp_path: Any) -> None:
    """pypaimon: (bit_length + 8) // 8 bytes; Java/paimond: minimal two's complement."""
    _, _, table = _physical(warehouse, "db.row_append")
    fields = [DataField(0, "big", AtomicType("DECIMAL(30, 0)"))]
    rtype = row_type(("big", DecimalType(precision=30, scale=0)))
    values = [Decimal(-128), Decimal(-(2**64)), Decimal(127), Decimal(0)]
    path = str(tmp_path / "pypaimon.row")
    with open(path, "wb") as sink:
        pp_writer = FormatRowWriter(sink, fields)
        pp_writer.write_table(pa.table({"big": pa.array(values, pa.decimal128(30, 0))}))
        pp_writer.close()
    with open(path, "rb") as source:
        theirs = source.read()
    ours = io.BytesIO()
    writer = RowFileWriter(ours, rtype)
    writer.write_rows([(v,) for v in values])
    writer.close()
    their_block, our_block = decompress(split(theirs)[2][0]), decompress(split(ours.getvalue())[2][0])
    assert their_block.startswith(bytes.fromhex("00 02ff80".replace(" ", "")))
    assert our_block.startswith(bytes.fromhex("00 0180".replace(" ", "")))
    assert [RowFileReader(io.BytesIO(theirs), rtype, path=path).read_row(i)[0] for i in range(4)] \
        == values
    our_path = str(tmp_path / "paimond.row")
    with open(our_path, "wb") as sink:
        sink.write(ours.getvalue())
    assert _pypaimon_read(table, our_path, fields)["big"].to_pylist() == values


def test_pypaimon_reads_a_paimond_file_committed_to_an_append_table(tmp_path: Any) -> None:
    from pypaimon import Schema

    warehouse, name = str(tmp_path / "wh"), "db.row_commit"
    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, options=TABLES["db.row_append"][1]),
                         False)
    table = catalog.get_table(name)
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist(_rows(random.Random(5), 0, 500), schema=SCHEMA))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
    before = read_rows(warehouse, name)
    rtype, _, _ = _physical(warehouse, name)
    new_rows = pa.Table.from_pylist(_rows(random.Random(11), 10_000, 1000), schema=SCHEMA)
    file_name = f"data-{uuid.uuid4()}-0.row"
    path = os.path.join(warehouse, "db.db", "row_commit", "bucket-0", file_name)
    with open(path, "wb") as sink:
        writer = RowFileWriter(sink, rtype)
        writer.write_batch(new_rows)
        writer.close()
    meta = DataFileMeta(
        file_name=file_name, file_size=os.path.getsize(path), row_count=new_rows.num_rows,
        min_key=EMPTY_MANIFEST_ROW, max_key=EMPTY_MANIFEST_ROW, key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS, min_sequence_number=0, max_sequence_number=0, schema_id=0,
        level=0, extra_files=(), creation_time_millis=int(time.time() * 1000),
        delete_row_count=0, embedded_index=None, file_source=0, value_stats_cols=(),
        external_path=None, first_row_id=None, write_cols=None, write_cols_sequences=None)
    append_files(open_table(open_storage(warehouse), warehouse, name),
                 [(EMPTY_MANIFEST_ROW, 0, -1, meta)])
    after = read_rows(warehouse, name)
    assert after.num_rows == before.num_rows + new_rows.num_rows
    expected = pa.concat_tables([before, new_rows.cast(before.schema)])
    assert sort_rows(after, ["id"]).to_pylist() == sort_rows(expected, ["id"]).to_pylist()
