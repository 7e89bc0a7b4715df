"""Schema and snapshot JSON: every field, unknown keys kept, clear errors on bad input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from paimond.errors import CodecError
from paimond.format.meta.schema import decode_schema, encode_schema
from paimond.format.meta.snapshot import Snapshot, decode_snapshot, encode_snapshot
from paimond.format.types.data_types import DecimalType, IntType, VarCharType

JAVA_SCHEMA = {
    "version": 3,
    "id": 2,
    "fields": [
        {"id": 0, "name": "id", "type": "INT NOT NULL"},
        {"id": 1, "name": "dt", "type": "STRING NOT NULL", "description": "day"},
        {"id": 2, "name": "price", "type": "DECIMAL(20, 4)"},
        {"id": 3, "name": "attrs", "type": {"type": "MAP", "key": "STRING NOT NULL",
                                             "value": "STRING"}},
    ],
    "highestFieldId": 3,
    "partitionKeys": ["dt"],
    "primaryKeys": ["id", "dt"],
    "options": {"bucket": "4", "merge-engine": "deduplicate"},
    "comment": "orders",
    "timeMillis": 1700000000000,
}


def test_java_schema_round_trips_byte_for_byte_through_json() -> None:
    schema = decode_schema(json.dumps(JAVA_SCHEMA).encode())
    assert schema.id == 2
    assert schema.primary_keys == ("id", "dt")
    assert schema.trimmed_primary_keys == ("id",)
    assert schema.key_type.field_types == [IntType(nullable=False)]
    assert schema.partition_type.field_names == ["dt"]
    assert schema.field("price").type == DecimalType(precision=20, scale=4)
    assert schema.field("dt").description == "day"
    assert json.loads(encode_schema(schema)) == JAVA_SCHEMA


def test_unknown_schema_keys_survive_a_rewrite() -> None:
    raw = dict(JAVA_SCHEMA, futureKey={"nested": [1, 2]})
    schema = decode_schema(json.dumps(raw).encode())
    assert schema.extra == {"futureKey": {"nested": [1, 2]}}
    assert json.loads(encode_schema(schema))["futureKey"] == {"nested": [1, 2]}


def test_old_schema_defaults() -> None:
    raw = {"id": 0, "fields": [{"id": 0, "name": "a", "type": "STRING"}],
           "partitionKeys": [], "primaryKeys": [], "options": {}}
    schema = decode_schema(json.dumps(raw).encode())
    assert schema.version == 1
    assert schema.time_millis == 0
    assert schema.highest_field_id == 0
    assert schema.fields[0].type == VarCharType(length=2147483647)


@pytest.mark.parametrize("data, reason", [
    (b"{not json", "invalid schema JSON"),
    (b"[1]", "not an object"),
    (b'{"id": 0}', "missing 'fields'"),
    (b'{"id": 0, "fields": [{"id": 0, "name": "a", "type": "WHAT"}]}', "invalid schema JSON"),
    (b'{"version": 9, "id": 0, "fields": []}', "newer than the supported"),
])
def test_bad_schema_json_raises_codec_error(data: bytes, reason: str) -> None:
    with pytest.raises(CodecError, match=reason):
        decode_schema(data)


JAVA_SNAPSHOT = {
    "version": 3,
    "id": 7,
    "schemaId": 0,
    "baseManifestList": "manifest-list-a-0",
    "baseManifestListSize": 1200,
    "deltaManifestList": "manifest-list-a-1",
    "deltaManifestListSize": 900,
    "changelogManifestList": None,
    "indexManifest": "index-manifest-b-0",
    "commitUser": "u1",
    "commitIdentifier": 9223372036854775807,
    "commitKind": "COMPACT",
    "timeMillis": 1700000000123,
    "totalRecordCount": 10,
    "deltaRecordCount": -2,
    "watermark": -9223372036854775808,
    "nextRowId": 0,
}


def test_java_snapshot_round_trip_omits_nulls() -> None:
    snapshot = decode_snapshot(json.dumps(JAVA_SNAPSHOT).encode())
    assert snapshot.id == 7
    assert snapshot.commit_kind == "COMPACT"
    assert snapshot.delta_record_count == -2
    assert snapshot.changelog_manifest_list is None
    assert snapshot.manifest_lists() == ["manifest-list-a-0", "manifest-list-a-1"]
    expected = {k: v for k, v in JAVA_SNAPSHOT.items() if v is not None}
    assert json.loads(encode_snapshot(snapshot)) == expected


def test_tag_fields_and_unknown_keys_are_preserved() -> None:
    raw = dict(JAVA_SNAPSHOT, tagCreateTime=[2024, 1, 1, 0, 0], tagTimeRetained="PT1H", x=1)
    snapshot = decode_snapshot(json.dumps(raw).encode())
    assert snapshot.extra == {"tagCreateTime": [2024, 1, 1, 0, 0], "tagTimeRetained": "PT1H",
                              "x": 1}
    assert json.loads(encode_snapshot(snapshot))["tagTimeRetained"] == "PT1H"


def test_snapshot_without_version_key_stays_without_it() -> None:
    raw = {k: v for k, v in JAVA_SNAPSHOT.items() if k != "version"}
    snapshot = decode_snapshot(json.dumps(raw).encode())
    assert snapshot.version is None
    assert "version" not in json.loads(encode_snapshot(snapshot))


@pytest.mark.parametrize("data, reason", [
    (b"", "invalid snapshot JSON"),
    (b'{"id": 1', "invalid snapshot JSON"),
    (b'"text"', "not an object"),
    (json.dumps({k: v for k, v in JAVA_SNAPSHOT.items() if k != "commitKind"}).encode(),
     "missing commitKind"),
    (json.dumps(dict(JAVA_SNAPSHOT, id="seven")).encode(), "invalid snapshot JSON"),
    (json.dumps(dict(JAVA_SNAPSHOT, version=4)).encode(), "newer than the supported"),
])
def test_bad_snapshot_json_raises_codec_error(data: bytes, reason: str) -> None:
    with pytest.raises(CodecError, match=reason):
        decode_snapshot(data)


_NAMES = st.text(min_size=1, max_size=20)
_LONGS = st.integers(-(2**63), 2**63 - 1)


@given(st.builds(
    Snapshot,
    id=st.integers(1, 2**40), schema_id=st.integers(0, 100), base_manifest_list=_NAMES,
    delta_manifest_list=_NAMES, commit_user=_NAMES, commit_identifier=_LONGS,
    commit_kind=st.sampled_from(["APPEND", "COMPACT", "OVERWRITE", "ANALYZE"]),
    time_millis=st.integers(0, 2**45), version=st.sampled_from([None, 3]),
    base_manifest_list_size=st.none() | st.integers(0, 2**40),
    changelog_manifest_list=st.none() | _NAMES, index_manifest=st.none() | _NAMES,
    total_record_count=st.none() | _LONGS, delta_record_count=st.none() | _LONGS,
    watermark=st.none() | _LONGS, properties=st.none() | st.dictionaries(_NAMES, _NAMES),
    next_row_id=st.none() | st.integers(0, 2**40), uuid=st.none() | st.uuids().map(str),
    extra=st.dictionaries(st.sampled_from(["futureA", "futureB"]), st.integers()),
))
def test_snapshot_json_round_trips(snapshot: Snapshot) -> None:
    assert decode_snapshot(encode_snapshot(snapshot)) == snapshot
