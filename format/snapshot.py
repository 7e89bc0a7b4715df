"""Snapshot JSON (``snapshot/snapshot-<id>``, also tags and changelogs): Java ``Snapshot`` v3.

Absent keys stay absent on rewrite (Jackson ``NON_NULL``), unknown keys are preserved in
``extra``; tags add ``tagCreateTime`` / ``tagTimeRetained``, which land in ``extra`` too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from paimond.errors import CodecError

BATCH_COMMIT_IDENTIFIER = 2**63 - 1
CURRENT_SNAPSHOT_VERSION = 3

# python attribute -> JSON key, in the order Java writes them.
_JSON_KEYS: dict[str, str] = {
    "version": "version",
    "id": "id",
    "schema_id": "schemaId",
    "base_manifest_list": "baseManifestList",
    "base_manifest_list_size": "baseManifestListSize",
    "delta_manifest_list": "deltaManifestList",
    "delta_manifest_list_size": "deltaManifestListSize",
    "changelog_manifest_list": "changelogManifestList",
    "changelog_manifest_list_size": "changelogManifestListSize",
    "index_manifest": "indexManifest",
    "commit_user": "commitUser",
    "commit_identifier": "commitIdentifier",
    "commit_kind": "commitKind",
    "time_millis": "timeMillis",
    "total_record_count": "totalRecordCount",
    "delta_record_count": "deltaRecordCount",
    "changelog_record_count": "changelogRecordCount",
    "watermark": "watermark",
    "statistics": "statistics",
    "properties": "properties",
    "next_row_id": "nextRowId",
    "uuid": "uuid",
    "writer_version": "writerVersion",
    "operation": "operation",
}
_REQUIRED = ("id", "schema_id", "base_manifest_list", "delta_manifest_list", "commit_user",
             "commit_identifier", "commit_kind", "time_millis")


@dataclass(frozen=True, slots=True)
class Snapshot:
    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: str
    time_millis: int
    version: int | None = CURRENT_SNAPSHOT_VERSION
    base_manifest_list_size: int | None = None
    delta_manifest_list_size: int | None = None
    changelog_manifest_list: str | None = None
    changelog_manifest_list_size: int | None = None
    index_manifest: str | None = None
    total_record_count: int | None = None
    delta_record_count: int | None = None
    changelog_record_count: int | None = None
    watermark: int | None = None
    statistics: str | None = None
    properties: dict[str, str] | None = None
    next_row_id: int | None = None
    uuid: str | None = None
    writer_version: str | None = None
    operation: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def manifest_lists(self) -> list[str]:
        """Names of every manifest list this snapshot references."""
        names = [self.base_manifest_list, self.delta_manifest_list]
        if self.changelog_manifest_list:
            names.append(self.changelog_manifest_list)
        return names


_INT_FIELDS = {"id", "schema_id", "commit_identifier", "time_millis", "version",
               "base_manifest_list_size", "delta_manifest_list_size",
               "changelog_manifest_list_size", "total_record_count", "delta_record_count",
               "changelog_record_count", "watermark", "next_row_id"}


def decode_snapshot(data: bytes) -> Snapshot:
    """Parse snapshot (or tag) JSON; raises CodecError when malformed."""
    try:
        raw = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise CodecError(f"invalid snapshot JSON: {error}") from None
    if not isinstance(raw, dict):
        raise CodecError("snapshot JSON is not an object")
    by_key = {json_key: attr for attr, json_key in _JSON_KEYS.items()}
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in raw.items():
        attr = by_key.get(key)
        if attr is None:
            extra[key] = value
        elif value is not None:
            values[attr] = value
    missing = [_JSON_KEYS[a] for a in _REQUIRED if a not in values]
    if missing:
        raise CodecError(f"snapshot JSON is missing {', '.join(missing)}")
    version = values.get("version")
    if version is not None and int(version) > CURRENT_SNAPSHOT_VERSION:
        raise CodecError(f"snapshot version {version} is newer than the supported "
                         f"{CURRENT_SNAPSHOT_VERSION}")
    try:
        for attr in _INT_FIELDS & values.keys():
            if isinstance(values[attr], bool) or not isinstance(values[attr], (int, str)):
                raise ValueError(f"{_JSON_KEYS[attr]} must be an integer")
            values[attr] = int(values[attr])
    except ValueError as error:
        raise CodecError(f"invalid snapshot JSON: {error}") from None
    if "version" not in values:
        values["version"] = None
    return Snapshot(**values, extra=extra)


def encode_snapshot(snapshot: Snapshot) -> bytes:
    """Snapshot JSON with Java's key order; None values are omitted."""
    out: dict[str, Any] = {}
    for attr, key in _JSON_KEYS.items():
        value = getattr(snapshot, attr)
        if value is not None:
            out[key] = value
    out.update(snapshot.extra)
    return json.dumps(out, indent=2, ensure_ascii=False).encode("utf-8")
