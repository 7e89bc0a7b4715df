"""Arrow types and values as Hypothesis strategies for the Fory row format, and ``same``, the
equality that treats NaN and decimals exactly."""

from __future__ import annotations

import math
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

INT64 = (-(2**63), 2**63 - 1)


_EXACT = Context(prec=200)


FIXED_TYPES = [pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(),
               pa.float64(), pa.date32(), pa.timestamp("us"), pa.duration("us")]


def decimal_types(max_precision: int = 76) -> st.SearchStrategy[pa.DataType]:
    def build(precision: int, scale: int) -> pa.DataType:
        return (pa.decimal128 if precision <= 38 else pa.decimal256)(precision, scale)
    return st.integers(1, max_precision).flatmap(
        lambda p: st.integers(0, p).map(lambda s: build(p, s)))


MAP_KEY_TYPES = st.sampled_from([pa.int32(), pa.int64(), pa.string(), pa.binary(), pa.date32()])


def struct_of(types: list[pa.DataType]) -> pa.DataType:
    return pa.struct([(f"f{i}", t) for i, t in enumerate(types)])


def non_null_values(t: pa.DataType) -> st.SearchStrategy[Any]:
    """Values of ``t`` in the codec's dialect (temporal types as integers)."""
    if pa.types.is_struct(t):
        return st.fixed_dictionaries({f.name: values(f.type) for f in t})
    if pa.types.is_map(t):
        return st.lists(st.tuples(non_null_values(t.key_type), values(t.item_type)), max_size=3)
    if pa.types.is_list(t):
        return st.lists(values(t.value_type), max_size=4)
    if pa.types.is_decimal(t):
        bound, scale = 10**t.precision - 1, t.scale
        return st.integers(-bound, bound).map(lambda u: Decimal(u).scaleb(-scale, _EXACT))
    scalars: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(), "int8": st.integers(-128, 127), "int16": st.integers(-(2**15), 2**15 - 1),
        "int32": st.integers(-(2**31), 2**31 - 1), "int64": st.integers(*INT64),
        "float": st.floats(width=32), "double": st.floats(),
        "date32[day]": st.integers(-(2**31), 2**31 - 1),
        "timestamp[us]": st.integers(*INT64), "duration[us]": st.integers(*INT64),
        "string": st.text(max_size=12), "binary": st.binary(max_size=12),
    }
    return scalars[str(t)]


def values(t: pa.DataType) -> st.SearchStrategy[Any]:
    return st.none() | non_null_values(t)


def same(a: Any, b: Any) -> bool:
    """Equal values, NaN equal to NaN and -0.0 unequal to 0.0."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
