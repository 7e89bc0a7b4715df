"""The planning view of a manifest file: per entry, only the fields a compaction planner reads
(Java ``ManifestEntry`` / ``DataFileMeta``, apache/paimon 5dacde516b, as in
:mod:`paimond.format.meta.manifest`).

A planner of a table with a million live files must not hold a million ``DataFileMeta``
objects with their statistics; this decoder leaves the statistics, the max key and the
other fields planning never reads as the Avro reader returned them, to be dropped with the
manifest's records. It checks what :func:`~paimond.format.meta.manifest.decode_manifest` checks
(version, kind, required fields), so a file one decoder accepts the other accepts too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from paimond.errors import CodecError
from paimond.format.meta.avro_container import read_records, read_records_at
from paimond.format.meta.manifest import (
    FILE_KIND_ADD,
    MANIFEST_ENTRY_VERSION,
    ManifestEntry,
    check_kind,
    check_version,
    entry_from_record,
)

# DataFileMeta fields decode_manifest requires and this decoder does not otherwise read
_REQUIRED_UNREAD = ("_ROW_COUNT", "_MAX_KEY")
_STATS_FIELDS = ("_MIN_VALUES", "_MAX_VALUES")


class SlimEntry(NamedTuple):
    """One manifest entry as planning sees it. ``identifier`` is Java's
    ``FileEntry.Identifier`` (as :attr:`ManifestEntry.identifier`)."""

    kind: int
    partition: bytes
    bucket: int
    total_buckets: int
    level: int
    file_name: str
    extra_files: tuple[str, ...]
    embedded_index: bytes | None
    external_path: str | None
    file_size: int
    min_key: bytes
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    creation_time_millis: int | None
    row_count: int = 0  # status reads it (rows per level)


def _slim(r: dict[str, Any]) -> SlimEntry:
    check_version(r, MANIFEST_ENTRY_VERSION, "manifest entry")
    f = r["_FILE"]
    for name in _REQUIRED_UNREAD:
        f[name]  # a missing required field fails here, as in decode_manifest
    for stats in (f["_KEY_STATS"], f["_VALUE_STATS"]):
        for name in _STATS_FIELDS:
            stats[name]
    g = f.get
    return SlimEntry(check_kind(r["_KIND"], "manifest entry"), r["_PARTITION"], r["_BUCKET"],
                     r["_TOTAL_BUCKETS"], f["_LEVEL"], f["_FILE_NAME"], tuple(f["_EXTRA_FILES"]),
                     g("_EMBEDDED_FILE_INDEX"), g("_EXTERNAL_PATH"), f["_FILE_SIZE"],
                     f["_MIN_KEY"], f["_MIN_SEQUENCE_NUMBER"], f["_MAX_SEQUENCE_NUMBER"],
                     f["_SCHEMA_ID"], g("_CREATION_TIME"), f["_ROW_COUNT"])


def decode_manifest_slim(data: bytes) -> list[SlimEntry]:
    """The entries of a manifest file, in file order, as :class:`SlimEntry`.

    Raises CodecError for malformed Avro, an unknown ``_VERSION`` or ``_KIND``, or a missing
    required field."""
    records = read_records(data)
    try:
        return [_slim(r) for r in records]
    except KeyError as e:
        raise CodecError(f"manifest entry lacks required field {e.args[0]}") from e
    except (TypeError, AttributeError, ValueError) as e:  # e.g. null where a record belongs
        raise CodecError(f"manifest entry has a malformed record: {e}") from e


def decode_manifest_slim_whole(data: bytes, whole: Callable[[SlimEntry], bool]
                               ) -> tuple[list[SlimEntry], dict[int, ManifestEntry]]:
    """:func:`decode_manifest_slim`, plus the ADD entries for which ``whole`` of their slim
    entry is true, whole (as ``decode_manifest`` decodes them), by position: built from the
    records already decoded, so a planner that will need them reads nothing twice."""
    records = read_records(data)
    try:
        slim = [_slim(r) for r in records]
        kept = {at: entry_from_record(records[at]) for at, e in enumerate(slim)
                if e.kind == FILE_KIND_ADD and whole(e)}
    except KeyError as e:
        raise CodecError(f"manifest entry lacks required field {e.args[0]}") from e
    except (TypeError, AttributeError, ValueError) as e:
        raise CodecError(f"manifest entry has a malformed record: {e}") from e
    return slim, kept


def decode_manifest_added(data: bytes, wanted: Mapping[int, tuple[object, ...]]
                          ) -> list[ManifestEntry]:
    """The entries at the positions of ``wanted`` (0: the file's first entry), whole, as
    :func:`~paimond.format.meta.manifest.decode_manifest` decodes them, decoding only the Avro
    blocks that hold one. Each must be an ADD with the identifier ``wanted`` gives.

    Raises CodecError as ``decode_manifest``, and for an entry that is not the one wanted."""
    records = read_records_at(data, wanted)
    if missing := sorted(set(wanted) - records.keys()):
        raise CodecError(f"has {missing[0]} entries or fewer, entry {missing[0]} was read before")
    try:
        entries = [(at, entry_from_record(records[at])) for at in sorted(wanted)]
    except KeyError as e:
        raise CodecError(f"manifest entry lacks required field {e.args[0]}") from e
    except (TypeError, AttributeError, ValueError) as e:
        raise CodecError(f"manifest entry has a malformed record: {e}") from e
    for at, entry in entries:
        if entry.kind != FILE_KIND_ADD or entry.identifier != wanted[at]:
            raise CodecError(f"entry {at} is not the ADD of {wanted[at]} read before")
    return [entry for _, entry in entries]
