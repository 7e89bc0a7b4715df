"""Paimon data types: ``org.apache.paimon.types.*`` (Paimon 1.x/2.x).

Their text and JSON forms, as schema files hold them, are in :mod:`paimond.format.types.type_json`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

MAX_LENGTH = 2147483647
"""Length of STRING (= VARCHAR(MAX)) and BYTES (= VARBINARY(MAX))."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DataType:
    nullable: bool = True

    @property
    def name(self) -> str:
        """The root name as in Paimon's ``DataTypeRoot`` (``INT``, ``VARCHAR``, ``ROW``...)."""
        raise NotImplementedError

    def copy(self, nullable: bool) -> DataType:
        return replace(self, nullable=nullable)

    def sql(self) -> str:
        """Java ``asSQLString`` of this type, without nullability."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.sql() + ("" if self.nullable else " NOT NULL")


@dataclass(frozen=True, slots=True, kw_only=True)
class BooleanType(DataType):
    @property
    def name(self) -> str:
        return "BOOLEAN"

    def sql(self) -> str:
        return "BOOLEAN"


@dataclass(frozen=True, slots=True, kw_only=True)
class TinyIntType(DataType):
    @property
    def name(self) -> str:
        return "TINYINT"

    def sql(self) -> str:
        return "TINYINT"


@dataclass(frozen=True, slots=True, kw_only=True)
class SmallIntType(DataType):
    @property
    def name(self) -> str:
        return "SMALLINT"

    def sql(self) -> str:
        return "SMALLINT"


@dataclass(frozen=True, slots=True, kw_only=True)
class IntType(DataType):
    @property
    def name(self) -> str:
        return "INT"

    def sql(self) -> str:
        return "INT"


@dataclass(frozen=True, slots=True, kw_only=True)
class BigIntType(DataType):
    @property
    def name(self) -> str:
        return "BIGINT"

    def sql(self) -> str:
        return "BIGINT"


@dataclass(frozen=True, slots=True, kw_only=True)
class FloatType(DataType):
    @property
    def name(self) -> str:
        return "FLOAT"

    def sql(self) -> str:
        return "FLOAT"


@dataclass(frozen=True, slots=True, kw_only=True)
class DoubleType(DataType):
    @property
    def name(self) -> str:
        return "DOUBLE"

    def sql(self) -> str:
        return "DOUBLE"


@dataclass(frozen=True, slots=True, kw_only=True)
class DateType(DataType):
    @property
    def name(self) -> str:
        return "DATE"

    def sql(self) -> str:
        return "DATE"


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantType(DataType):
    @property
    def name(self) -> str:
        return "VARIANT"

    def sql(self) -> str:
        return "VARIANT"


@dataclass(frozen=True, slots=True, kw_only=True)
class BlobType(DataType):
    @property
    def name(self) -> str:
        return "BLOB"

    def sql(self) -> str:
        return "BLOB"


@dataclass(frozen=True, slots=True, kw_only=True)
class CharType(DataType):
    length: int = 1

    @property
    def name(self) -> str:
        return "CHAR"

    def sql(self) -> str:
        return f"CHAR({self.length})"


@dataclass(frozen=True, slots=True, kw_only=True)
class VarCharType(DataType):
    length: int = 1

    @property
    def name(self) -> str:
        return "VARCHAR"

    def sql(self) -> str:
        return "STRING" if self.length == MAX_LENGTH else f"VARCHAR({self.length})"


@dataclass(frozen=True, slots=True, kw_only=True)
class BinaryType(DataType):
    length: int = 1

    @property
    def name(self) -> str:
        return "BINARY"

    def sql(self) -> str:
        return f"BINARY({self.length})"


@dataclass(frozen=True, slots=True, kw_only=True)
class VarBinaryType(DataType):
    length: int = 1

    @property
    def name(self) -> str:
        return "VARBINARY"

    def sql(self) -> str:
        return "BYTES" if self.length == MAX_LENGTH else f"VARBINARY({self.length})"


@dataclass(frozen=True, slots=True, kw_only=True)
class DecimalType(DataType):
    precision: int = 10
    scale: int = 0

    @property
    def name(self) -> str:
        return "DECIMAL"

    def sql(self) -> str:
        return f"DECIMAL({self.precision}, {self.scale})"


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeType(DataType):
    precision: int = 0

    @property
    def name(self) -> str:
        return "TIME"

    def sql(self) -> str:
        return f"TIME({self.precision})"


@dataclass(frozen=True, slots=True, kw_only=True)
class TimestampType(DataType):
    precision: int = 6

    @property
    def name(self) -> str:
        return "TIMESTAMP"

    def sql(self) -> str:
        return f"TIMESTAMP({self.precision})"


@dataclass(frozen=True, slots=True, kw_only=True)
class LocalZonedTimestampType(DataType):
    precision: int = 6

    @property
    def name(self) -> str:
        return "TIMESTAMP_LTZ"

    def sql(self) -> str:
        return f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"


@dataclass(frozen=True, slots=True, kw_only=True)
class ArrayType(DataType):
    element: DataType

    @property
    def name(self) -> str:
        return "ARRAY"

    def sql(self) -> str:
        return f"ARRAY<{self.element}>"


@dataclass(frozen=True, slots=True, kw_only=True)
class MultisetType(DataType):
    element: DataType

    @property
    def name(self) -> str:
        return "MULTISET"

    def sql(self) -> str:
        return f"MULTISET<{self.element}>"


@dataclass(frozen=True, slots=True, kw_only=True)
class MapType(DataType):
    key: DataType
    value: DataType

    @property
    def name(self) -> str:
        return "MAP"

    def sql(self) -> str:
        return f"MAP<{self.key}, {self.value}>"


@dataclass(frozen=True, slots=True, kw_only=True)
class VectorType(DataType):
    element: DataType
    length: int

    @property
    def name(self) -> str:
        return "VECTOR"

    def sql(self) -> str:
        return f"VECTOR<{self.element}, {self.length}>"


@dataclass(frozen=True, slots=True)
class DataField:
    id: int
    name: str
    type: DataType
    description: str | None = None
    default_value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RowType(DataType):
    fields: tuple[DataField, ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        return "ROW"

    def sql(self) -> str:
        inner = ", ".join(f"`{f.name}` {f.type}" for f in self.fields)
        return f"ROW<{inner}>"

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def field_types(self) -> list[DataType]:
        return [f.type for f in self.fields]

    def project(self, names: list[str]) -> RowType:
        by_name = {f.name: f for f in self.fields}
        missing = [n for n in names if n not in by_name]
        if missing:
            raise KeyError(f"no field named {missing} in {self.field_names}")
        return RowType(fields=tuple(by_name[n] for n in names), nullable=self.nullable)


def row_type(*fields: tuple[str, DataType]) -> RowType:
    """Build a RowType from (name, type) pairs with ids 0..n-1 (tests and keys)."""
    return RowType(fields=tuple(DataField(i, n, t) for i, (n, t) in enumerate(fields)))


def is_fixed_length(data_type: DataType) -> bool:
    """Whether BinaryRow stores the value entirely inside its 8-byte slot (Java ``isInFixedLengthPart``)."""
    if isinstance(data_type, DecimalType):
        return data_type.precision <= 18
    if isinstance(data_type, (TimestampType, LocalZonedTimestampType)):
        return data_type.precision <= 3
    return isinstance(data_type, (BooleanType, TinyIntType, SmallIntType, IntType, BigIntType,
                                  FloatType, DoubleType, DateType, TimeType))
