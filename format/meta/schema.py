"""Table schema JSON (``schema/schema-<id>``): Java ``TableSchema`` / ``SchemaSerializer``.

Keys Paimon knows are parsed into :class:`TableSchema`; any other key is kept in ``extra`` and
written back unchanged, so a schema rewritten by paimond loses nothing a newer Paimon added.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from paimond.errors import CodecError, TypeParseError
from paimond.format.types.data_types import DataField, RowType
from paimond.format.types.type_json import field_to_json, parse_field

CURRENT_SCHEMA_VERSION = 3
_KNOWN_KEYS = ("version", "id", "fields", "highestFieldId", "partitionKeys", "primaryKeys",
               "options", "comment", "timeMillis")


@dataclass(frozen=True, slots=True)
class TableSchema:
    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: dict[str, str]
    comment: str | None = None
    time_millis: int = 0
    version: int = CURRENT_SCHEMA_VERSION
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def row_type(self) -> RowType:
        return RowType(fields=self.fields)

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for candidate in self.fields:
            if candidate.name == name:
                return candidate
        raise KeyError(f"schema {self.id} has no field {name!r}")

    @property
    def trimmed_primary_keys(self) -> tuple[str, ...]:
        """Primary key minus partition fields: the key columns written to data files."""
        trimmed = tuple(k for k in self.primary_keys if k not in self.partition_keys)
        return trimmed or self.primary_keys

    @property
    def partition_type(self) -> RowType:
        return self.row_type.project(list(self.partition_keys))

    @property
    def key_type(self) -> RowType:
        """Type of min/max keys in manifests (trimmed primary key)."""
        return self.row_type.project(list(self.trimmed_primary_keys))


def decode_schema(data: bytes) -> TableSchema:
    """Parse schema JSON; raises CodecError on anything malformed."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise CodecError(f"invalid schema JSON: {error}") from None
    if not isinstance(raw, dict):
        raise CodecError("schema JSON is not an object")
    try:
        version = int(raw.get("version", 1))
        if version > CURRENT_SCHEMA_VERSION:
            raise CodecError(f"schema version {version} is newer than the supported "
                             f"{CURRENT_SCHEMA_VERSION}")
        fields = tuple(parse_field(f) for f in raw["fields"])
        comment = raw.get("comment")
        return TableSchema(
            id=int(raw["id"]),
            fields=fields,
            highest_field_id=int(raw.get("highestFieldId", max((f.id for f in fields), default=-1))),
            partition_keys=tuple(raw.get("partitionKeys") or ()),
            primary_keys=tuple(raw.get("primaryKeys") or ()),
            options={str(k): str(v) for k, v in (raw.get("options") or {}).items()},
            comment=None if comment is None else str(comment),
            time_millis=int(raw.get("timeMillis", 0)),
            version=version,
            extra={k: v for k, v in raw.items() if k not in _KNOWN_KEYS},
        )
    except KeyError as missing:
        raise CodecError(f"schema JSON is missing {missing}") from None
    except (TypeError, ValueError, TypeParseError) as error:
        raise CodecError(f"invalid schema JSON: {error}") from None


def encode_schema(schema: TableSchema) -> bytes:
    """Schema JSON in Java's key order; unknown keys from the source are appended."""
    out: dict[str, Any] = {
        "version": schema.version,
        "id": schema.id,
        "fields": [field_to_json(f) for f in schema.fields],
        "highestFieldId": schema.highest_field_id,
        "partitionKeys": list(schema.partition_keys),
        "primaryKeys": list(schema.primary_keys),
        "options": dict(schema.options),
    }
    if schema.comment is not None:
        out["comment"] = schema.comment
    out["timeMillis"] = schema.time_millis
    out.update(schema.extra)
    return json.dumps(out, indent=2, ensure_ascii=False).encode("utf-8")
