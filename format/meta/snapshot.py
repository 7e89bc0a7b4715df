"""Snapshot JSON (``snapshot/snapshot-<id>``, also tags and changelogs): Java ``Snapshot`` v3.

Absent keys stay absent on rewrite (Jackson ``NON_NULL``), unknown keys are preserved in
``extra``; tags add ``tagCreateTime`` / ``tagTimeRetained``, which land in ``extra`` too.

A tag (Java ``org.apache.paimon.tag.Tag``) is the snapshot JSON plus those two fields, written
by Jackson's JSR-310 module with its defaults (timestamps as numbers, in nanoseconds): the
``LocalDateTime`` create time as ``[year, month, day, hour, minute(, second(, nano))]``, trailing
zero parts left out, and the ``Duration`` retention as decimal seconds with nine fraction digits
(``86400.000000000``; zero is ``0.0``). Java writes both only when the tag has a retention.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
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


TAG_CREATE_TIME, TAG_TIME_RETAINED = "tagCreateTime", "tagTimeRetained"
_NANOS_PER_SECOND = 1_000_000_000


def encode_local_date_time(moment: datetime.datetime) -> list[int]:
    """Jackson's array form of a Java ``LocalDateTime`` (naive ``moment``)."""
    nano = moment.microsecond * 1000
    parts = [moment.year, moment.month, moment.day, moment.hour, moment.minute]
    if moment.second or nano:
        parts.append(moment.second)
        if nano:
            parts.append(nano)
    return parts


def decode_local_date_time(value: Any) -> datetime.datetime:
    """The inverse of :func:`encode_local_date_time` (also Jackson's ISO text form)."""
    try:
        if isinstance(value, str):
            return datetime.datetime.fromisoformat(value)
        if not isinstance(value, list) or not 3 <= len(value) <= 7 or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise ValueError(f"{value!r} is not a date-time array")
        year, month, day, hour, minute, second, nano = [*value, 0, 0, 0, 0][:7]
        return datetime.datetime(year, month, day, hour, minute, second, nano // 1000)
    except (ValueError, OverflowError) as error:
        raise CodecError(f"invalid {TAG_CREATE_TIME}: {error}") from None


def encode_duration(nanos: int) -> str:
    """Jackson's decimal-seconds text of a Java ``Duration`` of ``nanos`` (not negative)."""
    seconds, nano = divmod(nanos, _NANOS_PER_SECOND)
    if nanos == 0:
        return "0.0"
    return f"{seconds}.{nano:09d}"


def decode_duration(value: Any) -> int:
    """Nanoseconds of a ``Duration`` written as decimal seconds (or whole seconds)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise CodecError(f"invalid {TAG_TIME_RETAINED}: {value!r}")
    try:
        seconds = Decimal(repr(value) if isinstance(value, float) else str(value))
        return int(seconds * _NANOS_PER_SECOND)
    except (InvalidOperation, ValueError):
        raise CodecError(f"invalid {TAG_TIME_RETAINED}: {value!r}") from None


def tag_create_time(tag: Snapshot) -> datetime.datetime | None:
    value = tag.extra.get(TAG_CREATE_TIME)
    return None if value is None else decode_local_date_time(value)


def tag_time_retained_ns(tag: Snapshot) -> int | None:
    value = tag.extra.get(TAG_TIME_RETAINED)
    return None if value is None else decode_duration(value)


def encode_tag(snapshot: Snapshot, create_time: datetime.datetime | None,
               time_retained_ns: int | None) -> bytes:
    """A tag file of ``snapshot``: Java ``TagManager`` writes the plain snapshot JSON when
    the tag has no retention, else the snapshot with ``tagCreateTime`` and ``tagTimeRetained``
    after its own fields (the duration's digits exactly as Jackson writes them)."""
    extra = {k: v for k, v in snapshot.extra.items() if k not in (TAG_CREATE_TIME, TAG_TIME_RETAINED)}
    text = encode_snapshot(replace(snapshot, extra=extra)).decode("utf-8")
    if time_retained_ns is None:
        return text.encode("utf-8")
    if create_time is None or time_retained_ns < 0:
        raise ValueError("a tag with a retention needs a create time and a retention >= 0")
    fields = (f'  "{TAG_CREATE_TIME}": {json.dumps(encode_local_date_time(create_time))}',
              f'  "{TAG_TIME_RETAINED}": {encode_duration(time_retained_ns)}')
    assert text.endswith("\n}")
    return (text[:-2] + ",\n" + ",\n".join(fields) + "\n}").encode("utf-8")
