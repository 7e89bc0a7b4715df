"""The schema type grammar: Java ``DataTypeJsonParser`` and ``DataType.serializeJson``.

Atomic types are SQL strings (``"DECIMAL(10, 2) NOT NULL"``), complex types are JSON objects
(``{"type": "ARRAY", "element": ...}``). ``type_to_json(parse_type(x))`` is the form Java writes.
"""

from __future__ import annotations

import re
from typing import Any

from paimond.errors import TypeParseError
from paimond.format.types.data_types import (
    MAX_LENGTH,
    ArrayType,
    BigIntType,
    BinaryType,
    BlobType,
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
    VectorType,
)

_NOT_NULL = re.compile(r"\s+NOT\s+NULL\s*$", re.IGNORECASE)
_NULL = re.compile(r"\s+NULL\s*$", re.IGNORECASE)
_ARGS = re.compile(r"^([A-Z_ ]+?)\s*(?:\(\s*([0-9\s,]*)\s*\))?\s*(WITH(?:OUT)?\s+(?:LOCAL\s+)?TIME\s+ZONE)?$")


def _split_nullability(text: str) -> tuple[str, bool]:
    stripped = text.strip()
    if _NOT_NULL.search(stripped):
        return _NOT_NULL.sub("", stripped), False
    if _NULL.search(stripped):
        return _NULL.sub("", stripped), True
    return stripped, True


def _ints(args: str | None, text: str, count_max: int) -> list[int]:
    if args is None:
        return []
    parts = [p.strip() for p in args.split(",")]
    if len(parts) > count_max or any(not p.isdigit() for p in parts):
        raise TypeParseError(text, "bad type arguments")
    return [int(p) for p in parts]


def parse_type_string(text: str) -> DataType:
    """Parse an atomic SQL type string as written in schema files (``"INT NOT NULL"``).

    Complex types inside strings (``ARRAY<INT>``) are accepted too.
    """
    body, nullable = _split_nullability(text)
    upper = body.upper()
    if "<" in upper:
        return _parse_generic(body, nullable, text)
    match = _ARGS.match(upper)
    if not match:
        raise TypeParseError(text, "unknown type")
    root = " ".join(match.group(1).split())
    args = _ints(match.group(2), text, 2)
    zone = " ".join((match.group(3) or "").split())
    if zone and root not in ("TIMESTAMP", "TIME"):
        raise TypeParseError(text, "time zone clause on a non-timestamp type")
    return _atomic(root, args, zone, nullable, text)


def _atomic(root: str, args: list[int], zone: str, nullable: bool, text: str) -> DataType:
    def one(default: int) -> int:
        if len(args) > 1:
            raise TypeParseError(text, "too many arguments")
        return args[0] if args else default

    no_args = {
        "BOOLEAN": BooleanType, "TINYINT": TinyIntType, "SMALLINT": SmallIntType,
        "INT": IntType, "INTEGER": IntType, "BIGINT": BigIntType, "FLOAT": FloatType,
        "DOUBLE": DoubleType, "DOUBLE PRECISION": DoubleType, "DATE": DateType,
        "VARIANT": VariantType, "BLOB": BlobType,
    }
    if root in no_args:
        if args:
            raise TypeParseError(text, f"{root} takes no arguments")
        return no_args[root](nullable=nullable)
    if root == "STRING":
        return VarCharType(length=MAX_LENGTH, nullable=nullable)
    if root == "BYTES":
        return VarBinaryType(length=MAX_LENGTH, nullable=nullable)
    if root in ("CHAR", "CHARACTER"):
        return CharType(length=one(1), nullable=nullable)
    if root in ("VARCHAR", "CHARACTER VARYING", "CHAR VARYING"):
        return VarCharType(length=one(1), nullable=nullable)
    if root == "BINARY":
        return BinaryType(length=one(1), nullable=nullable)
    if root in ("VARBINARY", "BINARY VARYING"):
        return VarBinaryType(length=one(1), nullable=nullable)
    if root in ("DECIMAL", "DEC", "NUMERIC"):
        precision = args[0] if args else 10
        scale = args[1] if len(args) > 1 else 0
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise TypeParseError(text, "decimal precision must be 1..38 and scale 0..precision")
        return DecimalType(precision=precision, scale=scale, nullable=nullable)
    if root == "TIME":
        if zone:
            raise TypeParseError(text, "TIME has no time zone")
        return TimeType(precision=one(0), nullable=nullable)
    if root == "TIMESTAMP":
        precision = one(6)
        if zone.startswith("WITH LOCAL"):
            return LocalZonedTimestampType(precision=precision, nullable=nullable)
        if zone and zone != "WITHOUT TIME ZONE":
            raise TypeParseError(text, "only WITH LOCAL TIME ZONE is supported")
        return TimestampType(precision=precision, nullable=nullable)
    if root in ("TIMESTAMP_LTZ", "TIMESTAMP WITH LOCAL TIME ZONE"):
        return LocalZonedTimestampType(precision=one(6), nullable=nullable)
    raise TypeParseError(text, "unknown type")


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _parse_generic(body: str, nullable: bool, text: str) -> DataType:
    head, _, rest = body.partition("<")
    if not rest.endswith(">"):
        raise TypeParseError(text, "unbalanced '<'")
    inner = rest[:-1]
    root = head.strip().upper()
    args = _split_top_level(inner)
    if root == "ARRAY" and len(args) == 1:
        return ArrayType(element=parse_type_string(args[0]), nullable=nullable)
    if root == "MULTISET" and len(args) == 1:
        return MultisetType(element=parse_type_string(args[0]), nullable=nullable)
    if root == "MAP" and len(args) == 2:
        key, value = (parse_type_string(a) for a in args)
        return MapType(key=key, value=value, nullable=nullable)
    if root == "VECTOR" and len(args) == 2 and args[1].isdigit():
        return VectorType(element=parse_type_string(args[0]), length=int(args[1]),
                          nullable=nullable)
    if root == "ROW":
        fields = []
        for i, arg in enumerate(a for a in args if a):
            name, _, type_text = arg.partition(" ")
            fields.append(DataField(i, name.strip("`"), parse_type_string(type_text)))
        return RowType(fields=tuple(fields), nullable=nullable)
    raise TypeParseError(text, "unknown composite type")


def parse_type(value: Any) -> DataType:
    """Parse a type as found in schema JSON: a string, or an object for complex types."""
    if isinstance(value, str):
        return parse_type_string(value)
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise TypeParseError(value, "expected a string or an object with a 'type' string")
    root, nullable = _split_nullability(value["type"])
    root = root.upper()
    try:
        if root in ("ARRAY", "MULTISET"):
            element = parse_type(value["element"])
            cls = ArrayType if root == "ARRAY" else MultisetType
            return cls(element=element, nullable=nullable)
        if root == "MAP":
            return MapType(key=parse_type(value["key"]), value=parse_type(value["value"]),
                           nullable=nullable)
        if root == "ROW":
            fields = tuple(parse_field(f) for f in value["fields"])
            return RowType(fields=fields, nullable=nullable)
        if root == "VECTOR":
            return VectorType(element=parse_type(value["element"]), length=int(value["length"]),
                              nullable=nullable)
    except KeyError as missing:
        raise TypeParseError(value, f"missing key {missing}") from None
    raise TypeParseError(value, f"unknown complex type {root}")


def parse_field(value: Any) -> DataField:
    """Parse a DataField object ``{"id", "name", "type", "description"?, "defaultValue"?}``."""
    if not isinstance(value, dict):
        raise TypeParseError(value, "a field must be an object")
    try:
        return DataField(
            id=int(value["id"]),
            name=str(value["name"]),
            type=parse_type(value["type"]),
            description=value.get("description"),
            default_value=value.get("defaultValue"),
        )
    except KeyError as missing:
        raise TypeParseError(value, f"field is missing {missing}") from None


def type_to_json(data_type: DataType) -> Any:
    """The JSON form Java's ``DataType.serializeJson`` writes."""
    suffix = "" if data_type.nullable else " NOT NULL"
    if isinstance(data_type, (ArrayType, MultisetType)):
        return {"type": data_type.name + suffix, "element": type_to_json(data_type.element)}
    if isinstance(data_type, MapType):
        return {"type": "MAP" + suffix, "key": type_to_json(data_type.key),
                "value": type_to_json(data_type.value)}
    if isinstance(data_type, RowType):
        return {"type": "ROW" + suffix, "fields": [field_to_json(f) for f in data_type.fields]}
    if isinstance(data_type, VectorType):
        return {"type": "VECTOR" + suffix, "element": type_to_json(data_type.element),
                "length": data_type.length}
    return str(data_type)


def field_to_json(data_field: DataField) -> dict[str, Any]:
    out: dict[str, Any] = {"id": data_field.id, "name": data_field.name,
                           "type": type_to_json(data_field.type)}
    if data_field.description is not None:
        out["description"] = data_field.description
    if data_field.default_value is not None:
        out["defaultValue"] = data_field.default_value
    return out
