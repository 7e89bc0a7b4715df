"""Renaming a tag: Java ``TagManager.renameTag`` behind the ``rename_tag`` procedure
(apache/paimon release-2.0.0).

The tag must exist and the new name must not. Java renames the file; paimond creates the new
tag exclusively with the old file's bytes, then deletes the old file, so the snapshot is held
by one of the two at every moment (a concurrent tag deletion or snapshot expiry always sees a
tag of it). Killed in between, both tags remain, byte-identical; running the rename again
finishes it: a new tag holding exactly the old one's bytes is taken as this rename's copy and
the old file is deleted (Java refuses any existing new name; the outcome is the one its
rename would have had).
"""

from __future__ import annotations

from dataclasses import dataclass

from paimond.errors import CodecError, ConfigError, CorruptFileError, MissingFileError
from paimond.faults import crash_point
from paimond.format.meta.snapshot import decode_snapshot
from paimond.table.catalog import Table
from paimond.table.tags import check_tag_name, read_tag, tag_path


@dataclass(frozen=True, slots=True)
class RenameTagResult:
    table_name: str
    tag: str
    new_name: str
    snapshot_id: int
    dry_run: bool = False

    def describe(self) -> str:
        verb = "would rename" if self.dry_run else "renamed"
        return (f"{self.table_name}: {verb} tag {self.tag!r} to {self.new_name!r} "
                f"(snapshot {self.snapshot_id})")


def rename_tag(table: Table, *, name: str, new_name: str, dry_run: bool = False
               ) -> RenameTagResult:
    """Rename the tag ``name`` to ``new_name``. Raises ConfigError naming the missing tag or
    the existing new one."""
    check_tag_name(name)
    check_tag_name(new_name)
    storage = table.storage
    old_path = tag_path(table, name)
    try:
        data = storage.read_bytes(old_path)  # renamed as read: the same bytes, once
    except MissingFileError:
        raise ConfigError("tag", f"tag {name!r} of {table.name} does not exist") from None
    try:
        snapshot_id = decode_snapshot(data).id
    except CodecError as error:
        raise CorruptFileError(old_path, error.reason) from None
    new_path = tag_path(table, new_name)
    copied = _holds(table, new_path, data)
    if not copied and read_tag(table, new_name) is not None:
        raise ConfigError("to", f"tag {new_name!r} of {table.name} already exists")
    result = RenameTagResult(table.name, name, new_name, snapshot_id, dry_run)
    if dry_run:
        return result
    if not copied and not storage.create_exclusive(new_path, data):
        raise ConfigError("to", f"tag {new_name!r} of {table.name} already exists")
    crash_point("tags.tag_copied")
    storage.delete(old_path)
    return result


def _holds(table: Table, path: str, data: bytes) -> bool:
    """Whether the file at ``path`` exists holding exactly ``data``."""
    try:
        return table.storage.read_bytes(path) == data
    except MissingFileError:
        return False
