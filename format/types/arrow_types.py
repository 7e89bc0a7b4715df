"""Paimon data types as Arrow types, the mapping pypaimon and Paimon's Arrow bridge use.

TIMESTAMP(p) takes the coarsest Arrow unit that holds p digits (s, ms, us, ns); TIMESTAMP
WITH LOCAL TIME ZONE is the same in UTC; TIME is time32[ms]; CHAR/VARCHAR are string and
BINARY/VARBINARY binary; MAP keys are never null. Field ids travel as Parquet field ids.
"""

from __future__ import annotations

import pyarrow as pa

from paimond.errors import UnsupportedError
from paimond.format.types.data_types import (
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
)

FIELD_ID_KEY = b"PARQUET:field_id"

_SIMPLE: dict[type[DataType], pa.DataType] = {
    BooleanType: pa.bool_(), TinyIntType: pa.int8(), SmallIntType: pa.int16(),
    IntType: pa.int32(), BigIntType: pa.int64(), FloatType: pa.float32(),
    DoubleType: pa.float64(), DateType: pa.date32(), TimeType: pa.time32("ms"),
    CharType: pa.string(), VarCharType: pa.string(), BinaryType: pa.binary(),
    VarBinaryType: pa.binary(),
}


def timestamp_unit(precision: int) -> str:
    if precision == 0:
        return "s"
    if precision <= 3:
        return "ms"
    return "us" if precision <= 6 else "ns"


def to_arrow_type(data_type: DataType) -> pa.DataType:
    simple = _SIMPLE.get(type(data_type))
    if simple is not None:
        return simple
    if isinstance(data_type, DecimalType):
        return pa.decimal128(data_type.precision, data_type.scale)
    if isinstance(data_type, TimestampType):
        return pa.timestamp(timestamp_unit(data_type.precision))
    if isinstance(data_type, LocalZonedTimestampType):
        return pa.timestamp(timestamp_unit(data_type.precision), tz="UTC")
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("item", to_arrow_type(data_type.element),
                                 nullable=data_type.element.nullable))
    if isinstance(data_type, MultisetType):
        return pa.map_(pa.field("key", to_arrow_type(data_type.element), nullable=False),
                       pa.field("value", pa.int32(), nullable=False))
    if isinstance(data_type, MapType):
        return pa.map_(pa.field("key", to_arrow_type(data_type.key), nullable=False),
                       pa.field("value", to_arrow_type(data_type.value),
                                nullable=data_type.value.nullable))
    if isinstance(data_type, RowType):
        return pa.struct([to_arrow_field(f) for f in data_type.fields])
    raise UnsupportedError(f"no Arrow mapping for data type {data_type}")


def to_arrow_field(data_field: DataField) -> pa.Field:
    return pa.field(data_field.name, to_arrow_type(data_field.type),
                    nullable=data_field.type.nullable,
                    metadata={FIELD_ID_KEY: str(data_field.id).encode()})


def to_arrow_schema(row_type: RowType) -> pa.Schema:
    return pa.schema([to_arrow_field(f) for f in row_type.fields])


def field_id(field: pa.Field) -> int | None:
    """The Paimon field id recorded on an Arrow field (Parquet field id), if any."""
    raw = (field.metadata or {}).get(FIELD_ID_KEY)
    return int(raw) if raw is not None else None
