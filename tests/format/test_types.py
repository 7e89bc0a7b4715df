"""The type grammar: every Paimon type parses, prints as Java writes it, and round-trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paimond.errors import TypeParseError
from paimond.format.types.data_types import (
    MAX_LENGTH,
    ArrayType,
    BigIntType,
    BinaryType,
    BooleanType,
    CharType,
    DataField,
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
    VariantType,
    is_fixed_length,
)
from paimond.format.types.type_json import (
    parse_field,
    parse_type,
    parse_type_string,
    type_to_json,
)

JAVA_SPELLINGS = {
    "BOOLEAN": BooleanType(),
    "TINYINT NOT NULL": TinyIntType(nullable=False),
    "SMALLINT": SmallIntType(),
    "INT": IntType(),
    "BIGINT NOT NULL": BigIntType(nullable=False),
    "FLOAT": FloatType(),
    "DOUBLE": DoubleType(),
    "DATE": DateType(),
    "TIME(0)": TimeType(precision=0),
    "TIME(3) NOT NULL": TimeType(precision=3, nullable=False),
    "CHAR(10)": CharType(length=10),
    "VARCHAR(20)": VarCharType(length=20),
    "STRING": VarCharType(length=MAX_LENGTH),
    "BINARY(4)": BinaryType(length=4),
    "VARBINARY(9)": VarBinaryType(length=9),
    "BYTES": VarBinaryType(length=MAX_LENGTH),
    "DECIMAL(10, 2)": DecimalType(precision=10, scale=2),
    "DECIMAL(38, 10) NOT NULL": DecimalType(precision=38, scale=10, nullable=False),
    "TIMESTAMP(3)": TimestampType(precision=3),
    "TIMESTAMP(9)": TimestampType(precision=9),
    "TIMESTAMP(6) WITH LOCAL TIME ZONE": LocalZonedTimestampType(precision=6),
    "VARIANT": VariantType(),
}


@pytest.mark.parametrize("text", sorted(JAVA_SPELLINGS))
def test_java_spelling_parses_and_prints_back(text: str) -> None:
    parsed = parse_type_string(text)
    assert parsed == JAVA_SPELLINGS[text]
    assert str(parsed) == text
    assert type_to_json(parsed) == text


@pytest.mark.parametrize("alias, expected", [
    ("INTEGER", IntType()),
    ("int not null", IntType(nullable=False)),
    ("DEC(5, 1)", DecimalType(precision=5, scale=1)),
    ("NUMERIC", DecimalType(precision=10, scale=0)),
    ("DECIMAL", DecimalType(precision=10, scale=0)),
    ("DOUBLE PRECISION", DoubleType()),
    ("TIMESTAMP", TimestampType(precision=6)),
    ("TIMESTAMP(3) WITHOUT TIME ZONE", TimestampType(precision=3)),
    ("TIMESTAMP_LTZ(3)", LocalZonedTimestampType(precision=3)),
    ("TIME", TimeType(precision=0)),
    ("CHAR", CharType(length=1)),
    ("VARCHAR(5) NULL", VarCharType(length=5)),
])
def test_aliases_and_defaults(alias: str, expected: DataType) -> None:
    assert parse_type_string(alias) == expected


@pytest.mark.parametrize("bad", ["", "NOPE", "INT(3)", "DECIMAL(40, 2)", "DECIMAL(5, 6)",
                                 "VARCHAR(a)", "ARRAY<INT", "MAP<INT>", "DATE WITH LOCAL TIME ZONE"])
def test_bad_type_strings_raise_a_parse_error(bad: str) -> None:
    with pytest.raises(TypeParseError, match="cannot parse data type"):
        parse_type_string(bad)


def test_complex_json_objects_as_java_writes_them() -> None:
    value = {
        "type": "ROW NOT NULL",
        "fields": [
            {"id": 5, "name": "tags", "type": {"type": "ARRAY", "element": "STRING NOT NULL"}},
            {"id": 6, "name": "attrs", "type": {"type": "MAP", "key": "STRING NOT NULL",
                                                 "value": "BIGINT"}, "description": "d"},
            {"id": 7, "name": "bag", "type": {"type": "MULTISET NOT NULL", "element": "INT"}},
        ],
    }
    parsed = parse_type(value)
    assert parsed == RowType(nullable=False, fields=(
        DataField(5, "tags", ArrayType(element=VarCharType(length=MAX_LENGTH, nullable=False))),
        DataField(6, "attrs", MapType(key=VarCharType(length=MAX_LENGTH, nullable=False),
                                      value=BigIntType()), description="d"),
        DataField(7, "bag", MultisetType(element=IntType(), nullable=False)),
    ))
    assert type_to_json(parsed) == value


def test_pypaimon_nullable_key_in_complex_types_is_ignored() -> None:
    parsed = parse_type({"type": "ARRAY", "element": "INT", "nullable": True})
    assert parsed == ArrayType(element=IntType())


def test_field_with_missing_keys_is_an_error() -> None:
    with pytest.raises(TypeParseError, match="missing"):
        parse_field({"id": 1, "type": "INT"})


def test_fixed_length_part_matches_binary_row_rules() -> None:
    assert is_fixed_length(DecimalType(precision=18, scale=2))
    assert not is_fixed_length(DecimalType(precision=19, scale=0))
    assert is_fixed_length(TimestampType(precision=3))
    assert not is_fixed_length(LocalZonedTimestampType(precision=6))
    assert not is_fixed_length(VarCharType(length=3))


_ATOMIC = st.one_of(
    st.sampled_from([BooleanType(), TinyIntType(), SmallIntType(), IntType(), BigIntType(),
                     FloatType(), DoubleType(), DateType(), VariantType()]),
    st.builds(lambda n: CharType(length=n), st.integers(1, 255)),
    st.builds(lambda n: VarCharType(length=n), st.sampled_from([1, 20, MAX_LENGTH])),
    st.builds(lambda n: BinaryType(length=n), st.integers(1, 64)),
    st.builds(lambda n: VarBinaryType(length=n), st.sampled_from([1, 9, MAX_LENGTH])),
    st.integers(1, 38).flatmap(lambda p: st.builds(
        lambda s: DecimalType(precision=p, scale=s), st.integers(0, p))),
    st.builds(lambda p: TimeType(precision=p), st.integers(0, 9)),
    st.builds(lambda p: TimestampType(precision=p), st.integers(0, 9)),
    st.builds(lambda p: LocalZonedTimestampType(precision=p), st.integers(0, 9)),
)


def _nullable(strategy: st.SearchStrategy[DataType]) -> st.SearchStrategy[DataType]:
    return st.tuples(strategy, st.booleans()).map(lambda tn: tn[0].copy(nullable=tn[1]))


def _composite(children: st.SearchStrategy[DataType]) -> st.SearchStrategy[DataType]:
    names = st.text("abcdefghij_", min_size=1, max_size=6)
    fields = st.lists(st.tuples(names, children), min_size=1, max_size=3, unique_by=lambda f: f[0])
    return _nullable(st.one_of(
        st.builds(lambda e: ArrayType(element=e), children),
        st.builds(lambda e: MultisetType(element=e), children),
        st.builds(lambda k, v: MapType(key=k, value=v), children, children),
        fields.map(lambda fs: RowType(fields=tuple(
            DataField(i, n, t) for i, (n, t) in enumerate(fs)))),
    ))


TYPES = st.recursive(_nullable(_ATOMIC), _composite, max_leaves=6)


@given(TYPES)
def test_json_form_round_trips(data_type: DataType) -> None:
    assert parse_type(type_to_json(data_type)) == data_type


@given(_nullable(_ATOMIC))
def test_atomic_string_form_round_trips(data_type: DataType) -> None:
    assert parse_type_string(str(data_type)) == data_type
