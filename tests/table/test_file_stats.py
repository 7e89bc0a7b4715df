"""Statistics of new data files: modes, truncation (Java TruncateSimpleColStatsCollector),
Java's per-column mode rules, dense value stats, and hypothesis checks of min/max bounds."""

from __future__ import annotations

import math
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from paimond.errors import UnsupportedError
from paimond.format.binary.binary_row import decode_manifest_row
from paimond.format.types.data_types import (
    ArrayType,
    BigIntType,
    BooleanType,
    DataField,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    TimestampType,
    VarBinaryType,
    VarCharType,
)
from paimond.format.types.values import Timestamp
from paimond.table.data_files.file_stats import (
    COUNTS_MODE,
    FULL_MODE,
    NONE_MODE,
    NONE_STATS,
    SYSTEM_MODE,
    ColumnStats,
    ColumnStatsCollector,
    StatsMode,
    encode_dense_stats,
    parse_stats_mode,
    stats_modes,
    truncate_max,
    truncate_min,
)
from paimond.table.options.core import TableOptions

STRING = VarCharType(length=2147483647)
BYTES = VarBinaryType(length=2147483647)
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


def _collect(values: list, data_type, mode: StatsMode, arrow_type: pa.DataType,  # type: ignore[no-untyped-def]
             batches: int = 3) -> ColumnStats:
    collector = ColumnStatsCollector(data_type, mode)
    size = max(1, len(values) // batches)
    for start in range(0, len(values), size):
        collector.update(pa.array(values[start:start + size], type=arrow_type))
    return collector.result()


def test_stats_modes_parse_in_any_case() -> None:
    assert parse_stats_mode("Truncate(7)") == StatsMode("truncate", 7)
    assert parse_stats_mode(" FULL ") == FULL_MODE
    assert parse_stats_mode("counts") == COUNTS_MODE
    for bad in ("truncate(0)", "truncate", "max", ""):
        with pytest.raises(UnsupportedError):
            parse_stats_mode(bad)


def test_truncate_min_and_max_follow_java() -> None:
    assert truncate_min("abcdef", 3) == "abc"
    assert truncate_max("abcdef", 3) == "abd"
    assert truncate_max("abc", 3) == "abc"  # not truncated: unchanged
    assert truncate_max("ab\U0010ffffz", 3) == "ac"  # U+10FFFF cannot grow: carry left
    assert truncate_max("\U0010ffff" * 4, 3) is None  # no upper bound of 3 code points
    assert truncate_max("a\ud7ffz", 2) == "a\ue000"  # skips the surrogate range
    assert truncate_max("ééé", 2) == "éê"  # code points, not bytes
    assert truncate_max(b"\x01\xff\xff\x00", 3) == b"\x02"
    assert truncate_max(b"\xff\xff\xff\x00", 3) is None
    assert truncate_max(b"\xff\xff", 3) == b"\xff\xff"
    assert truncate_max(7, 1) == 7 and truncate_min(7, 1) == 7


def test_truncate_mode_without_upper_bound_nulls_min_and_max_but_keeps_null_count() -> None:
    stats = _collect(["\U0010ffff" * 20, "a", None], STRING, StatsMode("truncate", 16), pa.string())
    assert stats == ColumnStats(None, None, 1)
    stats = _collect([b"\xff" * 20, b"\x00", None, None], BYTES, StatsMode("truncate", 4), pa.binary())
    assert stats == ColumnStats(None, None, 2)


def test_modes_none_counts_full_truncate() -> None:
    values = ["b" * 20, None, "a" * 30, "c"]
    assert _collect(values, STRING, NONE_MODE, pa.string()) == NONE_STATS
    assert _collect(values, STRING, COUNTS_MODE, pa.string()) == ColumnStats(None, None, 1)
    assert _collect(values, STRING, FULL_MODE, pa.string()) == ColumnStats("a" * 30, "c", 1)
    assert _collect(values, STRING, StatsMode("truncate", 16), pa.string()) == ColumnStats("a" * 16, "c", 1)
    assert _collect([None, None], STRING, FULL_MODE, pa.string()) == ColumnStats(None, None, 2)


def test_typed_min_max_values() -> None:
    ts = pa.array([5_000_000_123, -1, None], pa.int64()).cast(pa.timestamp("ns"))
    collector = ColumnStatsCollector(TimestampType(precision=9), FULL_MODE)
    collector.update(ts)
    assert collector.result() == ColumnStats(Timestamp.from_nanos(-1), Timestamp.from_nanos(5_000_000_123), 1)
    decimals = [Decimal("1.25"), Decimal("-3.50"), None]
    assert _collect(decimals, DecimalType(precision=10, scale=2), FULL_MODE,
                    pa.decimal128(10, 2)) == ColumnStats(Decimal("-3.50"), Decimal("1.25"), 1)
    assert _collect([True, None, False], BooleanType(), FULL_MODE, pa.bool_()) == ColumnStats(False, True, 1)
    # Nested columns: null counts only (no order).
    assert _collect([[1], None], ArrayType(element=IntType()), FULL_MODE,
                    pa.list_(pa.int32())) == ColumnStats(None, None, 1)


def test_nan_makes_float_bounds_unknown() -> None:
    unknown = ColumnStats(None, None, 1)
    assert _collect([1.0, math.nan, None], DoubleType(), FULL_MODE, pa.float64()) == unknown
    assert _collect([1.5, -2.0], FloatType(), FULL_MODE, pa.float32()) == ColumnStats(-2.0, 1.5, 0)


def test_java_mode_rules_system_columns_field_modes_and_keep_first_n() -> None:
    options = TableOptions({"metadata.stats-mode": "full", "fields.b.stats-mode": "counts",
                            "metadata.stats-keep-first-n-columns": "2",
                            "metadata.stats-mode.per.level": "0:none"})
    names = ["_KEY_k", "_SEQUENCE_NUMBER", "_VALUE_KIND", "k", "a", "b", "c", "d"]
    # System columns are truncate(128) and do not count; b's field mode counts, then n=2 is hit.
    assert stats_modes(options, names, level=1) == (
        SYSTEM_MODE, SYSTEM_MODE, SYSTEM_MODE, FULL_MODE, FULL_MODE, COUNTS_MODE, NONE_MODE, NONE_MODE)
    assert stats_modes(options, names, level=0)[3:5] == (NONE_MODE, NONE_MODE)
    # Avro primary-key files (createStatsFactoriesForAvro): no system rule, all columns count.
    assert stats_modes(options, names, level=1, avro_key_value=True) == (
        FULL_MODE, FULL_MODE, NONE_MODE, NONE_MODE, NONE_MODE, COUNTS_MODE, NONE_MODE, NONE_MODE)
    # Thin mode: value columns that are keys keep system stats.
    assert stats_modes(TableOptions({}), ["_SEQUENCE_NUMBER", "k", "a"],
                       thin_key_names=["_KEY_k"]) == (SYSTEM_MODE, SYSTEM_MODE, StatsMode("truncate", 16))


def test_dense_store_drops_columns_without_stats() -> None:
    fields = [DataField(0, "a", IntType()), DataField(1, "b", STRING), DataField(2, "c", BigIntType())]
    stats = [ColumnStats(1, 9, 0), NONE_STATS, ColumnStats(None, None, 4)]
    cols, encoded = encode_dense_stats(stats, fields)
    assert cols == ("a", "c")
    assert decode_manifest_row(encoded.min_values, [IntType(), BigIntType()]) == (1, None)
    assert encoded.null_counts == (0, 4)
    cols, encoded = encode_dense_stats(stats, fields, dense=False)
    assert cols is None and encoded.null_counts == (0, None, 4)
    every = [ColumnStats(1, 1, 0), ColumnStats("x", "y", 0), ColumnStats(2, 2, 0)]
    cols, _ = encode_dense_stats(every, fields)
    assert cols is None  # every column kept


@given(st.lists(st.one_of(st.none(), st.integers(-2**63, 2**63 - 1)), min_size=1, max_size=40))
def test_full_mode_min_max_are_pythons(values: list) -> None:
    present = [v for v in values if v is not None]
    stats = _collect(values, BigIntType(), FULL_MODE, pa.int64())
    assert stats.null_count == len(values) - len(present)
    assert (stats.min, stats.max) == ((min(present), max(present)) if present else (None, None))


@given(st.lists(st.one_of(st.none(), TEXT), min_size=1, max_size=30), st.integers(1, 6))
def test_truncated_string_bounds_hold_every_value(values: list, length: int) -> None:
    present = [v for v in values if v is not None]
    full = _collect(values, STRING, FULL_MODE, pa.string())
    cut = _collect(values, STRING, StatsMode("truncate", length), pa.string())
    assert cut.null_count == full.null_count == len(values) - len(present)
    if not present:
        assert (cut.min, cut.max) == (None, None)
        return
    assert (full.min, full.max) == (min(present), max(present))
    if cut.max is None:  # only when the max's first `length` code points are all U+10FFFF
        assert max(present)[:length] == "\U0010ffff" * length
        return
    assert len(cut.min) <= length and len(cut.max) <= length
    assert all(cut.min <= v <= cut.max for v in present)


@given(st.lists(st.one_of(st.none(), st.binary(max_size=10)), min_size=1, max_size=30), st.integers(1, 4))
def test_truncated_binary_bounds_hold_every_value(values: list, length: int) -> None:
    present = [v for v in values if v is not None]
    cut = _collect(values, BYTES, StatsMode("truncate", length), pa.binary())
    if not present or cut.max is None:
        assert cut.min is None and cut.max is None
        assert not present or max(present)[:length] == b"\xff" * length
        return
    assert all(cut.min <= v <= cut.max for v in present)


@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=False, width=32)), min_size=1, max_size=30))
def test_float_min_max_are_pythons(values: list) -> None:
    present = [v for v in values if v is not None]
    stats = _collect(values, FloatType(), FULL_MODE, pa.float32())
    if present:
        assert stats.min == min(present) and stats.max == max(present)
