"""Avro schemas of Paimon's manifest files (the container they travel in: ``avro_container``).

The schemas are what Java ``AvroSchemaConverter.convertToSchema`` makes of
``ManifestEntry.SCHEMA``, ``ManifestFileMeta.SCHEMA`` and ``IndexManifestEntry.SCHEMA`` with
``ManifestSchemaUtils.withFormatIdentifier`` (apache/paimon ``5dacde516b``, 2.1-SNAPSHOT):
record ``org.apache.paimon.avro.generated.record``, nested records ``record_<FIELD>``,
nullable fields ``["null", T]`` with ``"default": null``.

"""

from __future__ import annotations

from typing import Any

_NAMESPACE = "org.apache.paimon.avro.generated"

Schema = dict[str, Any]


def _opt(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": ["null", avro_type], "default": None}


def _req(name: str, avro_type: Any) -> dict[str, Any]:
    return {"name": name, "type": avro_type}


def _array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def _simple_stats(record_name: str) -> Schema:
    return {"type": "record", "name": record_name, "fields": [
        _req("_MIN_VALUES", "bytes"),
        _req("_MAX_VALUES", "bytes"),
        _opt("_NULL_COUNTS", _array(["null", "long"])),
    ]}


def _top(fields: list[dict[str, Any]]) -> Schema:
    return {"type": "record", "name": "record", "namespace": _NAMESPACE,
            "fields": [_req("_VERSION", "int"), *fields]}


_DATA_FILE_META: Schema = {"type": "record", "name": "record__FILE", "fields": [
    _req("_FILE_NAME", "string"),
    _req("_FILE_SIZE", "long"),
    _req("_ROW_COUNT", "long"),
    _req("_MIN_KEY", "bytes"),
    _req("_MAX_KEY", "bytes"),
    _req("_KEY_STATS", _simple_stats("record__FILE__KEY_STATS")),
    _req("_VALUE_STATS", _simple_stats("record__FILE__VALUE_STATS")),
    _req("_MIN_SEQUENCE_NUMBER", "long"),
    _req("_MAX_SEQUENCE_NUMBER", "long"),
    _req("_SCHEMA_ID", "long"),
    _req("_LEVEL", "int"),
    _req("_EXTRA_FILES", _array("string")),
    _opt("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
    _opt("_DELETE_ROW_COUNT", "long"),
    _opt("_EMBEDDED_FILE_INDEX", "bytes"),
    _opt("_FILE_SOURCE", "int"),
    _opt("_VALUE_STATS_COLS", _array("string")),
    _opt("_EXTERNAL_PATH", "string"),
    _opt("_FIRST_ROW_ID", "long"),
    _opt("_WRITE_COLS", _array("string")),
    _opt("_WRITE_COLS_SEQUENCES", _array("long")),
]}

MANIFEST_ENTRY_SCHEMA: Schema = _top([
    _req("_KIND", "int"),
    _req("_PARTITION", "bytes"),
    _req("_BUCKET", "int"),
    _req("_TOTAL_BUCKETS", "int"),
    _req("_FILE", _DATA_FILE_META),
])

MANIFEST_FILE_META_SCHEMA: Schema = _top([
    _req("_FILE_NAME", "string"),
    _req("_FILE_SIZE", "long"),
    _req("_NUM_ADDED_FILES", "long"),
    _req("_NUM_DELETED_FILES", "long"),
    _req("_PARTITION_STATS", _simple_stats("record__PARTITION_STATS")),
    _req("_SCHEMA_ID", "long"),
    _opt("_MIN_BUCKET", "int"),
    _opt("_MAX_BUCKET", "int"),
    _opt("_MIN_LEVEL", "int"),
    _opt("_MAX_LEVEL", "int"),
    _opt("_MIN_ROW_ID", "long"),
    _opt("_MAX_ROW_ID", "long"),
])

# Java's array element keeps the field's record name, so the items record is named after the
# field; its type is the nullable row of DeletionVectorMeta.SCHEMA.
_DV_META: Schema = {"type": "record", "name": "record__DELETIONS_VECTORS_RANGES", "fields": [
    _req("f0", "string"),
    _req("f1", "int"),
    _req("f2", "int"),
    _opt("_CARDINALITY", "long"),
]}

_GLOBAL_INDEX_META: Schema = {"type": "record", "name": "record__GLOBAL_INDEX", "fields": [
    _req("_ROW_RANGE_START", "long"),
    _req("_ROW_RANGE_END", "long"),
    _req("_INDEX_FIELD_ID", "int"),
    _opt("_EXTRA_FIELD_IDS", _array("int")),
    _opt("_INDEX_META", "bytes"),
    _opt("_SOURCE_META", "bytes"),
]}

INDEX_MANIFEST_ENTRY_SCHEMA: Schema = _top([
    _req("_KIND", "int"),
    _req("_PARTITION", "bytes"),
    _req("_BUCKET", "int"),
    _req("_INDEX_TYPE", "string"),
    _req("_FILE_NAME", "string"),
    _req("_FILE_SIZE", "long"),
    _req("_ROW_COUNT", "long"),
    _opt("_DELETIONS_VECTORS_RANGES", _array(["null", _DV_META])),
    _opt("_EXTERNAL_PATH", "string"),
    _opt("_GLOBAL_INDEX", _GLOBAL_INDEX_META),
])


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


def int32(value: int, field: str) -> int:
    """``value`` if it fits an Avro ``int``: fastavro would write a wider one unchecked.

    Raises ValueError otherwise."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{field}={value} does not fit an Avro int")
    return value


def optional_int32(value: int | None, field: str) -> int | None:
    return None if value is None else int32(value, field)
