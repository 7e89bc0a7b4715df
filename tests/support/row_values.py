"""Paimon data types and values as Hypothesis strategies, and the Java-written golden rows of
tests/golden/java/rowfile, for the row codecs."""

from __future__ import annotations

import json
import math
import os
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import strategies as st

from paimond.format.types.data_types import (
    MAX_LENGTH,
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    MapType,
    MultisetType,
    RowType,
    SmallIntType,
    TimestampType,
    TimeType,
    TinyIntType,
    VarBinaryType,
    VarCharType,
    row_type,
)
from paimond.format.types.type_json import parse_type_string
from paimond.format.types.values import Timestamp

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "java"  # tests/golden: copied in


ROWFILE_DIR = GOLDEN / "rowfile"


INT64 = (-(2**63), 2**63 - 1)


def golden_entries() -> dict[str, dict[str, Any]]:
    """index.json entries of rowfile/, skipping locally (failing under CI) when absent."""
    if not ROWFILE_DIR.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"golden vectors missing at {ROWFILE_DIR}")
        pytest.skip(f"golden vectors missing at {ROWFILE_DIR}")
    entries = json.loads((GOLDEN / "index.json").read_text())
    return {e["file"]: e for e in entries if e["file"].startswith("rowfile/")}


def golden_value(spec: Any) -> Any:
    """Python value of an index.json field value (MANIFEST.md sections 3 and 4)."""
    if isinstance(spec, list):
        return [golden_value(v) for v in spec]
    if not isinstance(spec, dict):
        return spec
    if "float" in spec:
        return struct.unpack("<f", struct.pack("<I", int(spec["bits"], 16)))[0]
    if "double" in spec:
        return struct.unpack("<d", struct.pack("<Q", int(spec["bits"], 16)))[0]
    if "bytes_hex" in spec:
        return bytes.fromhex(spec["bytes_hex"])
    if "decimal" in spec:
        return Decimal(spec["decimal"])
    if "millis" in spec:
        return Timestamp(spec["millis"], spec["nanoOfMillisecond"])
    if "array" in spec:
        return golden_value(spec["array"])
    if "map_entries_in_order" in spec:
        return [tuple(golden_value(kv)) for kv in spec["map_entries_in_order"]]
    if "row" in spec:
        return tuple(golden_value(spec["row"]))
    raise AssertionError(f"unknown golden value {spec}")


def golden_rows(entry: dict[str, Any]) -> tuple[RowType, list[tuple[Any, ...]]]:
    """Row type and rows of a golden .row file (the simple files are described by formula)."""
    parsed = parse_type_string(entry["row_type"])
    assert isinstance(parsed, RowType)
    if entry["row_values"] is None:
        return parsed, [(i, None if i % 10 == 9 else f"name-{i}", i * 1.5) for i in range(100)]
    return parsed, [tuple(golden_value(f["value"]) for f in row) for row in entry["row_values"]]


def canon(value: Any, exact_nan: bool = False) -> Any:
    """Comparable form: floats by bits (NaNs alike unless exact_nan), decimals with scale."""
    if isinstance(value, float):
        if math.isnan(value) and not exact_nan:
            return "NaN"
        return ("float", struct.pack("<d", value))
    if isinstance(value, Decimal):
        return ("decimal", value.as_tuple())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [canon(v, exact_nan) for v in value])
    return (type(value).__name__, value)


def _decimal_types() -> st.SearchStrategy[DataType]:
    return st.integers(1, 38).flatmap(
        lambda p: st.integers(0, p).map(lambda s: DecimalType(precision=p, scale=s)))


SCALAR_TYPES: st.SearchStrategy[DataType] = st.one_of(
    st.sampled_from([BooleanType(), TinyIntType(), SmallIntType(), IntType(), BigIntType(),
                     FloatType(), DoubleType(), DateType(), TimeType(), CharType(length=3),
                     VarCharType(length=MAX_LENGTH), BinaryType(length=4),
                     VarBinaryType(length=MAX_LENGTH)]),
    _decimal_types(),
    st.integers(0, 9).map(lambda p: TimestampType(precision=p)),
    st.integers(0, 9).map(lambda p: LocalZonedTimestampType(precision=p)),
)


def row_of(types: list[DataType]) -> RowType:
    return row_type(*((f"f{i}", t) for i, t in enumerate(types)))


def _nest(children: st.SearchStrategy[DataType]) -> st.SearchStrategy[DataType]:
    return st.one_of(
        children.map(lambda t: ArrayType(element=t)),
        st.tuples(children, children).map(lambda kv: MapType(key=kv[0], value=kv[1])),
        children.map(lambda t: MultisetType(element=t)),
        st.lists(children, max_size=4).map(row_of),
    )


DATA_TYPES = st.recursive(SCALAR_TYPES, _nest, max_leaves=6)


ROW_TYPES = st.lists(DATA_TYPES, max_size=10).map(row_of)


def _timestamp(precision: int, arrow: bool) -> st.SearchStrategy[Timestamp]:
    """Any int64 millis; for ``arrow`` only what the Arrow unit holds exactly (whole seconds
    at precision 0, whole micros up to 6, int64 nanoseconds from 7)."""
    if not arrow:
        nanos = st.just(0) if precision <= 3 else st.integers(0, 999_999)
        return st.builds(Timestamp, st.integers(*INT64), nanos)
    if precision == 0:
        return st.integers(-(2**53), 2**53).map(lambda s: Timestamp(s * 1000))
    if precision <= 3:
        return st.integers(*INT64).map(Timestamp)
    unit_ns = 1000 if precision <= 6 else 1
    limit = 2**63 // (1_000_000 // unit_ns) - 1
    return st.integers(-limit, limit).map(lambda v: Timestamp.from_nanos(v * unit_ns))


def non_null_values(data_type: DataType, arrow: bool = False) -> st.SearchStrategy[Any]:
    """Python values (``paimond.format.types.values``) the type round-trips exactly; with ``arrow``,
    also through the type's Arrow type (no NULL map keys, times of day, timestamps in the unit's
    range)."""
    simple = {
        "BOOLEAN": st.booleans(), "TINYINT": st.integers(-128, 127),
        "SMALLINT": st.integers(-(2**15), 2**15 - 1), "INT": st.integers(-(2**31), 2**31 - 1),
        "DATE": st.integers(-(2**31), 2**31 - 1),
        "TIME": st.integers(0, 86_399_999) if arrow else st.integers(-(2**31), 2**31 - 1),
        "BIGINT": st.integers(*INT64), "FLOAT": st.floats(width=32), "DOUBLE": st.floats(),
        "CHAR": st.text(max_size=12), "VARCHAR": st.text(max_size=12),
        "BINARY": st.binary(max_size=12), "VARBINARY": st.binary(max_size=12),
    }.get(data_type.name)
    if simple is not None:
        return simple
    if isinstance(data_type, DecimalType):
        bound, scale = 10**data_type.precision - 1, data_type.scale
        return st.integers(-bound, bound).map(lambda u: Decimal(f"{u}E-{scale}"))
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        return _timestamp(data_type.precision, arrow)
    if isinstance(data_type, ArrayType):
        return st.lists(values(data_type.element, arrow), max_size=10)
    if isinstance(data_type, MapType):
        keys = non_null_values(data_type.key, arrow) if arrow else values(data_type.key)
        return st.lists(st.tuples(keys, values(data_type.value, arrow)), max_size=5)
    if isinstance(data_type, MultisetType):
        keys = non_null_values(data_type.element, arrow) if arrow else values(data_type.element)
        counts = st.integers(-(2**31), 2**31 - 1) | (st.nothing() if arrow else st.none())
        return st.lists(st.tuples(keys, counts), max_size=5)
    if isinstance(data_type, RowType):
        return st.tuples(*(values(f.type, arrow) for f in data_type.fields))
    raise AssertionError(data_type)


def values(data_type: DataType, arrow: bool = False) -> st.SearchStrategy[Any]:
    return st.none() | non_null_values(data_type, arrow)


def rows_of(rtype: RowType, max_size: int = 20,
            arrow: bool = False) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    return st.lists(st.tuples(*(values(f.type, arrow) for f in rtype.fields)), max_size=max_size)
