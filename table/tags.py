"""Tag files: ``<table>/tag/tag-<name>``, Java ``TagManager`` (apache/paimon 5dacde516b).

A tag is a snapshot's JSON kept under a name; it pins the snapshot's files after the snapshot
itself expires. A tag with a retention also records when it was created (a local date-time)
and for how long it is kept (``format.meta.snapshot.encode_tag``). Tags are created exclusively:
an existing tag is never overwritten. :func:`delete_tag_file` deletes only the tag's file;
``maintenance.tags.deletion`` deletes the files only the tag kept with it (Java's
``TagDeletion``).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from paimond.errors import CodecError, ConfigError, CorruptFileError, MissingFileError
from paimond.format.meta.snapshot import (
    Snapshot,
    decode_snapshot,
    encode_tag,
    tag_create_time,
    tag_time_retained_ns,
)
from paimond.table.catalog import Table
from paimond.table.layout import TAG_DIR, TAG_PREFIX


@dataclass(frozen=True, slots=True)
class TagFile:
    """One tag: its name, the snapshot it pins, and its retention if it has one."""

    name: str
    snapshot: Snapshot
    create_time: datetime.datetime | None  # local date-time (Java LocalDateTime.now())
    time_retained_ns: int | None

    def expires_at(self) -> datetime.datetime | None:
        """The local date-time after which the tag expires; None: kept until deleted."""
        if self.create_time is None or self.time_retained_ns is None:
            return None
        return self.create_time + datetime.timedelta(microseconds=self.time_retained_ns // 1000)


def check_tag_name(name: str) -> str:
    """A tag name Java accepts (not blank) that is also one file name."""
    if not name or not name.strip():
        raise ConfigError("tag", "a tag name must not be blank")
    if "/" in name or "\\" in name or name in (".", ".."):
        raise ConfigError("tag", f"{name!r} is not a file name")
    return name


def tag_path(table: Table, name: str) -> str:
    return table.meta_file_path(TAG_DIR, TAG_PREFIX + check_tag_name(name))


def read_tag(table: Table, name: str) -> TagFile | None:
    """The tag ``name``, or None when it does not exist."""
    path = tag_path(table, name)
    try:
        data = table.storage.read_bytes(path)
    except MissingFileError:
        return None
    try:
        snapshot = decode_snapshot(data)
        return TagFile(name, snapshot, tag_create_time(snapshot), tag_time_retained_ns(snapshot))
    except CodecError as error:
        raise CorruptFileError(path, error.reason) from None


def list_tags(table: Table) -> list[TagFile]:
    """Every tag of the table, by name (a tag deleted while listing is left out)."""
    tags = []
    for status in table.storage.list_dir(table.meta_file_path(TAG_DIR)):
        if status.is_dir or not status.name.startswith(TAG_PREFIX):
            continue
        tag = read_tag(table, status.name[len(TAG_PREFIX):])
        if tag is not None:
            tags.append(tag)
    return sorted(tags, key=lambda t: t.name)


def create_tag_file(table: Table, name: str, snapshot: Snapshot, *,
                    create_time: datetime.datetime | None, time_retained_ns: int | None) -> bool:
    """Write the tag unless a tag of that name exists; True if this call created it.
    Without a retention the file is the plain snapshot JSON (no create time), as in Java."""
    data = encode_tag(snapshot, create_time, time_retained_ns)
    return table.storage.create_exclusive(tag_path(table, name), data)


def delete_tag_file(table: Table, name: str) -> bool:
    """Delete the tag's file only; True if it existed."""
    return table.storage.delete(tag_path(table, name))
