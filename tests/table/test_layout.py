"""Partition path naming and escaping as Java's PartitionPathUtils does it."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paimond.format.types.data_types import (
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    TimestampType,
    TimeType,
    VarCharType,
)
from paimond.format.types.values import Timestamp
from paimond.table.layout import (
    bucket_dir_name,
    escape_path_name,
    partition_matches,
    partition_path,
    unescape_path_name,
)

STRING = VarCharType(length=2147483647)


@pytest.mark.parametrize("text, escaped", [
    ("a/b c", "a%2Fb c"),           # space is not escaped (pypaimon writes `dt=a%2Fb c`)
    ("k=v", "k%3Dv"),
    ("10:30", "10%3A30"),
    ("100%", "100%25"),
    ('"#\'*?\\{}[]^', "%22%23%27%2A%3F%5C%7B%7D%5B%5D%5E"),
    ("\x01\x1f\x7f", "%01%1F%7F"),
    ("日本", "日本"),
])
def test_escape(text: str, escaped: str) -> None:
    assert escape_path_name(text) == escaped
    assert unescape_path_name(escaped) == text


@given(st.text())
def test_unescape_inverts_escape(text: str) -> None:
    assert unescape_path_name(escape_path_name(text)) == text


def test_legacy_names_render_internal_values() -> None:
    names = ["d", "t", "ts", "b", "n", "x"]
    types = [DateType(), TimeType(), TimestampType(precision=3), BooleanType(),
             DecimalType(precision=10, scale=2), IntType()]
    values = [19723, 3600000, Timestamp(1700000000123), True, Decimal("12.50"), -7]
    assert partition_path(names, types, values) == (
        "d=19723/t=3600000/ts=2023-11-14T22%3A13%3A20.123/b=true/n=12.50/x=-7")


def test_java_local_date_time_drops_zero_seconds() -> None:
    path = partition_path(["ts"], [TimestampType(precision=6)], [Timestamp(1700000040000)])
    assert path == "ts=2023-11-14T22%3A14"
    micros = partition_path(["ts"], [TimestampType(precision=6)], [Timestamp(1, 500_000)])
    assert micros == "ts=1970-01-01T00%3A00%3A00.001500"


def test_non_legacy_names_cast_to_string() -> None:
    path = partition_path(["d", "ts"], [DateType(), TimestampType(precision=3)],
                          [19723, Timestamp(1700000000123)], legacy_name=False)
    assert path == "d=2024-01-01/ts=2023-11-14 22%3A13%3A20.123"


def test_null_and_blank_values_use_the_default_name() -> None:
    assert partition_path(["a", "b"], [STRING, STRING], [None, "  "]) == (
        "a=__DEFAULT_PARTITION__/b=__DEFAULT_PARTITION__")
    assert partition_path(["a"], [STRING], [None], default_name="null") == "a=null"


@pytest.mark.parametrize("value, single, java", [
    (1.5, True, "1.5"), (1e20, False, "1.0E20"), (14967611.765625, False, "1.4967611765625E7"),
    (9999999.0, False, "9999999.0"), (1e7, False, "1.0E7"), (0.001, False, "0.001"),
    (0.0001, False, "1.0E-4"), (-0.00123, False, "-0.00123"), (100.0, False, "100.0"),
    (-0.0, False, "-0.0"), (3.4028235e38, True, "3.4028235E38"), (0.1, True, "0.1"),
    (float("nan"), False, "NaN"), (float("-inf"), True, "-Infinity"),
])
def test_floats_print_like_java(value: float, single: bool, java: str) -> None:
    data_type = FloatType() if single else DoubleType()
    assert partition_path(["f"], [data_type], [value]) == f"f={java}"


def test_unpartitioned_and_bucket_dirs() -> None:
    assert partition_path([], [], []) == ""
    assert bucket_dir_name(3) == "bucket-3"
    assert bucket_dir_name(-2) == "bucket-postpone"


def test_partition_matches_needs_every_wanted_value() -> None:
    assert partition_matches("dt=2024-01-01/hr=3", {"dt": "2024-01-01"})
    assert partition_matches("dt=2024-01-01/hr=3", {"dt": "2024-01-01", "hr": "3"})
    assert not partition_matches("dt=2024-01-01/hr=3", {"dt": "2024-01-01", "hr": "4"})
    assert not partition_matches("dt=2024-01-01", {"region": "eu"})
    assert partition_matches("", {})  # no wanted values: every partition matches
