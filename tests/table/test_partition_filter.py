"""The ``--where`` partition filter: SQL's semantics checked against SQLite over small
partition sets (SQLite has SQL's three-valued logic and coerces a literal to an INTEGER
column's type, as the filter does), typed literals, path parsing, and refusals."""

from __future__ import annotations

import datetime
import pickle
import sqlite3
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paimond.errors import ConfigError
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import (
    BooleanType,
    DataField,
    DataType,
    DateType,
    DecimalType,
    IntType,
    TimestampType,
    VarBinaryType,
    VarCharType,
)
from paimond.format.types.values import Timestamp
from paimond.table.layout import partition_matches, partition_path
from paimond.table.partition_filter import parse_where, partition_filter, path_value


def _schema(partition: dict[str, DataType], others: tuple[str, ...] = ("id",)) -> TableSchema:
    fields = [DataField(i, name, t) for i, (name, t) in enumerate(partition.items())]
    fields += [DataField(len(fields) + i, name, IntType()) for i, name in enumerate(others)]
    return TableSchema(0, tuple(fields), len(fields) - 1, tuple(partition), (), {})


# ---- against SQLite ------------------------------------------------------------------------

DTS = ("2024-01-01", "2024-01-02", "2024-01-10", "x y", None)
HHS = (0, 1, 9, 10, None)
STRING_LITERALS = st.sampled_from(["'2024-01-01'", "'2024-01-02'", "'2024-01-05'", "'x y'",
                                   "'it''s'", "NULL"])
INT_LITERALS = st.sampled_from(["0", "1", "9", "10", "-3", "'9'", "'10'", "NULL"])
OPS = st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="])


def _predicates(column: str, literals: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda op, lit: f"{column} {op} {lit}", OPS, literals),
        st.builds(lambda op, lit: f"{lit} {op} {column}", OPS, literals),
        st.builds(lambda neg, lits: f"{column} {neg}IN ({', '.join(lits)})",
                  st.sampled_from(["", "NOT "]), st.lists(literals, min_size=1, max_size=3)),
        st.builds(lambda neg, a, b: f"{column} {neg}BETWEEN {a} AND {b}",
                  st.sampled_from(["", "not "]), literals, literals),
        st.builds(lambda neg: f"{column} IS {neg}NULL", st.sampled_from(["", "NOT "])),
    )


LEAVES = st.one_of(_predicates("dt", STRING_LITERALS), _predicates("hh", INT_LITERALS))
EXPRESSIONS = st.recursive(LEAVES, lambda inner: st.one_of(
    st.builds(lambda a, b: f"({a}) AND ({b})", inner, inner),
    st.builds(lambda a, b: f"({a}) or {b}", inner, inner),
    st.builds(lambda a: f"NOT ({a})", inner)), max_leaves=6)
STRING_INT = _schema({"dt": VarCharType(length=2147483647), "hh": IntType()})


def _path(dt: str | None, hh: int | None) -> str:
    return partition_path(("dt", "hh"), (VarCharType(length=2147483647), IntType()), (dt, hh))


@given(partitions=st.sets(st.tuples(st.sampled_from(DTS), st.sampled_from(HHS)), max_size=12),
       where=EXPRESSIONS)
def test_the_filter_selects_what_sqlite_selects(partitions: set[tuple[str | None, int | None]],
                                                where: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE p (dt TEXT, hh INTEGER)")
    db.executemany("INSERT INTO p VALUES (?, ?)", sorted(partitions, key=repr))
    expected = set(db.execute(f"SELECT dt, hh FROM p WHERE {where}").fetchall())
    selected = partition_filter(where, STRING_INT)
    assert {p for p in partitions if selected.matches_path(_path(*p))} == expected
    assert {p for p in partitions if partition_matches(_path(*p), selected)} == expected


# ---- typed values --------------------------------------------------------------------------


def test_a_date_partition_compares_as_dates_with_legacy_and_iso_paths() -> None:
    schema = _schema({"day": DateType()})
    chosen = partition_filter("day >= DATE '2024-01-02' and day < '2024-02-01'", schema)
    legacy = partition_filter("day >= DATE '2024-01-02' and day < '2024-02-01'", schema,
                              legacy_name=True)
    iso = partition_filter("day >= DATE '2024-01-02' and day < '2024-02-01'", schema,
                           legacy_name=False)
    epoch_day = (datetime.date(2024, 1, 2) - datetime.date(1970, 1, 1)).days
    assert chosen.matches_path(f"day={epoch_day}") and legacy.matches_path(f"day={epoch_day}")
    assert not legacy.matches_path(f"day={epoch_day - 1}")
    assert iso.matches_path("day=2024-01-31") and not iso.matches_path("day=2024-02-01")


def test_timestamps_decimals_and_booleans_take_their_column_types() -> None:
    schema = _schema({"ts": TimestampType(precision=3), "price": DecimalType(precision=10,
                                                                             scale=2),
                      "ok": BooleanType()})
    path = partition_path(("ts", "price", "ok"), tuple(f.type for f in schema.fields[:3]),
                          (Timestamp(1_704_164_400_000, 0), Decimal("9.50"), True))
    for where, expected in [("ts = TIMESTAMP '2024-01-02 03:00:00'", True),
                            ("ts > '2024-01-02'", True), ("ts < DATE '2024-01-02'", False),
                            ("price = 9.5", True), ("price > '9.49' AND ok", None),
                            ("ok = true and price in (1, 9.50)", True), ("ok = false", False)]:
        if expected is None:
            with pytest.raises(ConfigError, match="expected"):
                partition_filter(where, schema)
            continue
        assert partition_filter(where, schema).matches_path(path) is expected, where


def test_a_string_column_compared_with_a_number_compares_numbers_as_sql_casts() -> None:
    selected = partition_filter("dt > 20240101", _schema({"dt": VarCharType(length=10)}))
    assert selected.matches_path("dt=20240102")
    assert not selected.matches_path("dt=9")  # 9 < 20240101 as numbers, "9" > "2..." as text
    assert not selected.matches_path("dt=abc")  # not a number: unknown, not selected


def test_escaped_paths_and_the_default_partition() -> None:
    selected = partition_filter("tag = 'a/b' or tag is null", _schema({"tag": VarCharType()}))
    assert selected.matches_path("tag=a%2Fb")
    assert selected.matches_path("tag=__DEFAULT_PARTITION__")
    assert not selected.matches_path("tag=a")


def test_a_filter_pickles_for_the_plan() -> None:
    selected = partition_filter("dt in ('2024-01-01') and hh != 3", STRING_INT)
    again = pickle.loads(pickle.dumps(selected))
    assert again == selected and again.matches_path("dt=2024-01-01/hh=4")


@pytest.mark.parametrize("text", ["10", "-1", "2.50", "1e3"])
def test_numbers_from_paths(text: str) -> None:
    assert path_value(text, "number", legacy_name=True) == Decimal(text)


# ---- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "message"), [
    ("id = 1", "only partition columns may be filtered: id is not a partition column"),
    ("other = 1", "other is not a column of the table"),
    ("dt = ", "expected a literal"),
    ("dt = 'a' and", "expected a partition column"),
    ("dt = 'a' hh = 1", "expected AND, OR or the end"),
    ("(dt = 'a'", "expected )"),
    ("dt ~ 'a'", "unexpected '~'"),
    ("hh = 'nine'", "'nine' is not a number value"),
    ("hh = DATE '2024-01-01'", "is not a number value"),
    ("dt not = 'a'", "expected IN or BETWEEN after NOT"),
    ("", "is empty"),
])
def test_bad_predicates_are_config_errors(where: str, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as error:
        partition_filter(where, STRING_INT)
    assert message in str(error.value) and "--where" in str(error.value)


def test_an_unordered_partition_type_is_refused() -> None:
    with pytest.raises(ConfigError, match="cannot be filtered here"):
        partition_filter("b = 'x'", _schema({"b": VarBinaryType()}))


def test_precedence_is_sqls() -> None:
    assert parse_where("a = 1 or b = 2 and not c = 3") == parse_where(
        "(a = 1) OR ((b = 2) AND (NOT (c = 3)))")
