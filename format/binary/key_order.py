"""Paimon's key order as Python sort keys (Java's generated ``RecordComparator``).

Field by field, NULL first; numbers by value; strings and binary as unsigned bytes; FLOAT and
DOUBLE in ``Float.compare`` order (-0.0 < 0.0, NaN last); timestamps by (millis, nanos).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.meta.manifest import DataFileMeta
from paimond.format.types.data_types import DataType, DoubleType, FloatType

SortKey = tuple[Any, ...]


def _field_key(data_type: DataType) -> Callable[[Any], Any]:
    if isinstance(data_type, (FloatType, DoubleType)):
        def float_key(value: float) -> tuple[int, float, int]:
            if math.isnan(value):
                return (2, 0.0, 0)
            # -0.0 sorts before 0.0: the sign breaks the tie that == would hide.
            return (1, value, 0 if math.copysign(1.0, value) < 0 else 1)
        return float_key
    return lambda value: value


def sort_key_function(types: Sequence[DataType]) -> Callable[[Sequence[Any]], SortKey]:
    """A function mapping decoded key values to a tuple that sorts in Paimon's key order."""
    field_keys = [_field_key(t) for t in types]

    def sort_key(values: Sequence[Any]) -> SortKey:
        return tuple((0,) if v is None else (1, f(v))
                     for f, v in zip(field_keys, values, strict=True))

    return sort_key


def min_key_order(key_types: Sequence[DataType]) -> Callable[[DataFileMeta], SortKey]:
    """Sort key of a file's min key (for ordering the files of a sorted run)."""
    sort_key = sort_key_function(key_types)
    return lambda meta: sort_key(decode_manifest_row(meta.min_key, key_types))


def max_key_order(key_types: Sequence[DataType]) -> Callable[[DataFileMeta], SortKey]:
    sort_key = sort_key_function(key_types)
    return lambda meta: sort_key(decode_manifest_row(meta.max_key, key_types))
