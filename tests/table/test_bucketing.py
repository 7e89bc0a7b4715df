"""Paimon's bucket functions (``paimond.table.bucketing``) against pypaimon 2.1.0's
``FixedBucketRowKeyExtractor`` (its own ``BinaryRow`` hash), over the key types writers use,
nulls, keys of several columns and bucket numbers; the ``mod`` function against Java's
``floorMod``. Java's own extractor judges the same function end to end in
``tests/maintenance/test_postpone_compaction.py``."""

from __future__ import annotations

import datetime
import random

import numpy as np
import pyarrow as pa
import pytest
from pypaimon import Schema
from pypaimon.schema.table_schema import TableSchema as PypaimonSchema
from pypaimon.write.row_key_extractor import FixedBucketRowKeyExtractor

from paimond.errors import UnsupportedError
from paimond.format.binary.binary_row import encode_row
from paimond.format.file_index.hashing import murmur_hash
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import (
    BigIntType,
    BooleanType,
    DataField,
    DataType,
    DateType,
    IntType,
    SmallIntType,
    VarCharType,
)
from paimond.table.bucketing import BucketFunction, bucket_function_of, fixed_width_rows, hash_words
from paimond.table.options.core import TableOptions

RNG = random.Random(7)
STRING = VarCharType(length=2**31 - 1)
INT = IntType()
COLUMNS = {  # name -> (arrow type, paimond type, values)
    "i64": (pa.int64(), BigIntType(), [RNG.randint(-2**63, 2**63 - 1) for _ in range(200)]),
    "i32": (pa.int32(), IntType(), [RNG.randint(-2**31, 2**31 - 1) for _ in range(200)]),
    "i16": (pa.int16(), SmallIntType(), [RNG.randint(-2**15, 2**15 - 1) for _ in range(200)]),
    "b": (pa.bool_(), BooleanType(), [RNG.random() < 0.5 for _ in range(200)]),
    "d": (pa.date32(), DateType(),
          [datetime.date(1970, 1, 1) + datetime.timedelta(days=RNG.randint(-9999, 30000))
           for _ in range(200)]),
    "s": (pa.string(), STRING,
          ["", "a", "abcdefg", "abcdefgh", "héllo wörld, a longer string"]
          + [str(RNG.random())[: RNG.randint(0, 18)] for _ in range(195)]),
}


def _expected(names: tuple[str, ...], batch: pa.RecordBatch, buckets: int) -> list[int]:
    fields = [pa.field(n, batch.schema.field(n).type, nullable=False) for n in names]
    schema = pa.schema(fields + [pa.field("v", pa.string())])
    options = {"bucket": str(buckets)}
    paimon = Schema.from_pyarrow_schema(schema, primary_keys=list(names), options=options)
    extractor = FixedBucketRowKeyExtractor(PypaimonSchema.from_schema(0, paimon))
    rows = pa.RecordBatch.from_arrays([batch.column(n) for n in names]
                                      + [pa.array(["x"] * batch.num_rows)], schema=schema)
    return list(extractor._extract_buckets_batch(rows))


@pytest.mark.parametrize("names", [("i64",), ("i32",), ("i16",), ("d",), ("s",), ("i32", "s"),
                                   ("b", "i64", "d")])
@pytest.mark.parametrize("buckets", [1, 3, 16, 1000])
def test_default_function_is_pypaimons(names: tuple[str, ...], buckets: int) -> None:
    batch = pa.RecordBatch.from_arrays([pa.array(COLUMNS[n][2], COLUMNS[n][0]) for n in names],
                                       names=list(names))
    function = BucketFunction("default", names, tuple(COLUMNS[n][1] for n in names))
    ours = function.buckets(batch, buckets)
    assert ours.tolist() == _expected(names, batch, buckets)
    assert ours.min() >= 0 and ours.max() < buckets


def test_the_fast_layout_is_the_binary_row_encoders() -> None:
    """Keys of integer-like types are laid out in numpy; each row's bytes must be what
    ``encode_row`` (the codec the manifests use) gives, nulls included (bit set, slot zero)."""
    values = [None, 0, 5, None, -1, 2**31 - 1]
    days = [None, -3, 0, 19000, None, 1]
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.int64()), pa.array(values, pa.int32()),
                                        pa.array([True, None, False, True, None, False]),
                                        pa.array(days, pa.date32())], names=["a", "b", "c", "d"])
    types = (BigIntType(), IntType(), BooleanType(), DateType())
    words = fixed_width_rows([batch.column(i) for i in range(4)], types, batch.num_rows)
    for row in range(batch.num_rows):
        values_of_row = [batch.column(i)[row].as_py() for i in range(4)]
        if values_of_row[3] is not None:
            values_of_row[3] = (values_of_row[3] - datetime.date(1970, 1, 1)).days
        assert words[row].tobytes() == encode_row(values_of_row, types), row


def test_word_hash_is_murmur3_of_the_bytes() -> None:
    """``hashBytesByWords`` over whole words equals ``hashBytes`` (``murmur_hash``, checked
    against Java in the file-index tests) of the same bytes."""
    rng = np.random.default_rng(3)
    for words in (2, 4, 9):
        matrix = rng.integers(0, 2**32, size=(50, words), dtype=np.uint32)
        ours = hash_words(matrix)
        assert ours.tolist() == [murmur_hash(row.astype("<u4").tobytes()) for row in matrix]


@pytest.mark.parametrize("arrow_type,paimond_type", [(pa.int32(), IntType()),
                                                     (pa.int64(), BigIntType())])
def test_mod_function_is_floor_mod(arrow_type: pa.DataType, paimond_type: object) -> None:
    values = [-7, -1, 0, 1, 6, 2**31 - 1, -(2**31)]
    batch = pa.RecordBatch.from_arrays([pa.array(values, arrow_type)], names=["k"])
    function = BucketFunction("mod", ("k",), (paimond_type,))  # type: ignore[arg-type]
    assert function.buckets(batch, 5).tolist() == [v % 5 for v in values]  # Python's % floors


def _schema(options: dict[str, str], key_type: DataType = INT) -> TableSchema:
    fields = (DataField(0, "k", key_type.copy(False)), DataField(1, "v", STRING))
    return TableSchema(0, fields, 1, (), ("k",), options)


def test_the_tables_function_and_what_is_refused() -> None:
    schema = _schema({"bucket": "-2"})
    assert bucket_function_of(schema, TableOptions.of(schema)).kind == "default"
    schema = _schema({"bucket": "-2", "bucket-function.type": "MOD"})
    assert bucket_function_of(schema, TableOptions.of(schema)).kind == "mod"
    for options, message in [({"bucket-function.type": "hive"}, "hive"),
                             ({"bucket-key": "nope"}, "nope")]:
        schema = _schema({"bucket": "-2", **options})
        with pytest.raises(UnsupportedError, match=message):
            bucket_function_of(schema, TableOptions.of(schema))
    schema = _schema({"bucket": "-2", "bucket-function.type": "mod"}, STRING)
    with pytest.raises(UnsupportedError, match="INT or BIGINT"):
        bucket_function_of(schema, TableOptions.of(schema))


def test_split_keeps_each_buckets_rows_in_order() -> None:
    values = list(range(100, 0, -1))
    rows = pa.table({"k": pa.array(values, pa.int64()), "pos": pa.array(range(100))})
    function = BucketFunction("default", ("k",), (BigIntType(),))
    buckets = function.buckets(rows, 7).tolist()
    parts = list(function.split(rows, 7))
    assert [b for b, _ in parts] == sorted(set(buckets))
    for bucket, part in parts:
        assert part.column("pos").to_pylist() == [i for i, b in enumerate(buckets) if b == bucket]
    assert list(function.split(rows.slice(0, 0), 7)) == []
