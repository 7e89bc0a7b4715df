"""Replacing a tag: Java ``TagManager.replaceTag`` behind ``AbstractFileStoreTable.replaceTag``
and the ``replace_tag`` procedure (apache/paimon release-2.0.0).

The tag must exist; it then pins snapshot N (Java ``findSnapshot``: a live snapshot, or one a
tag holds), by default the latest, with the retention given, or none: Java's replace does not
fall back to ``tag.default-time-retained`` (without a retention the file is the plain snapshot
JSON). A tag name of ``tag.automatic-creation``'s period may not be put on a snapshot already
tagged automatically (Java ``validateNoAutoTag``, counting the replaced tag itself).

Java overwrites the tag file and leaves the files only the old snapshot's tag kept (its
snapshot expired) to orphan removal. paimond deletes them as deleting the tag does
(``maintenance.tags.deletion``): the candidates are noted in a recorded job, the file is
overwritten, the references are read again with the new tag among them, and what nothing needs
goes. A replacement whose snapshot went away while it was written is withdrawn: the tag file
is deleted, since whatever expired that snapshot may be deleting its files.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from paimond.clock import Clock
from paimond.errors import ConfigError, UnsupportedError
from paimond.format.meta.snapshot import encode_tag
from paimond.maintenance.expire.references import FileTally
from paimond.maintenance.job_cleanup import clean_dead_jobs
from paimond.maintenance.tags.deletion import delete_tag_with_files, preview_tag_deletion
from paimond.maintenance.tags.job import check_tag_options
from paimond.maintenance.tags.period import tag_period
from paimond.maintenance.tags.plan import TagState
from paimond.maintenance.tags.source import find_snapshot, latest_snapshot, still_there
from paimond.table.catalog import Table
from paimond.table.options.core import TableOptions
from paimond.table.tags import check_tag_name, delete_tag_file, list_tags, read_tag, tag_path

_NS_PER_MS = 1_000_000


@dataclass(frozen=True, slots=True)
class ReplaceTagResult:
    table_name: str
    tag: str
    old_snapshot_id: int
    snapshot_id: int
    from_tag: str | None  # the tag that held the snapshot (it had expired); None: live
    time_retained_ns: int | None
    tag_file_only: bool  # the old snapshot is live (or is the new one): no file but the tag's
    files: FileTally = field(default_factory=FileTally)  # only the old tag kept; deleted
    dry_run: bool = False

    def describe(self) -> str:
        verb = "would replace" if self.dry_run else "replaced"
        retained = ("no retention" if self.time_retained_ns is None
                    else f"retained {self.time_retained_ns // _NS_PER_MS} ms")
        source = (f"snapshot {self.snapshot_id}" if self.from_tag is None
                  else f"snapshot {self.snapshot_id} (held by tag {self.from_tag!r})")
        lines = [f"{self.table_name}: {verb} tag {self.tag!r}: snapshot {self.old_snapshot_id} "
                 f"-> {source}, {retained}"]
        if self.files.total_files:
            deleted = "would delete" if self.dry_run else "deleted"
            lines.append(f"  {deleted} {self.files.total_files} files only the old tag kept:")
            lines += self.files.lines("    ")
        return "\n".join(lines)


def _check_no_auto_tag(table: Table, options: TableOptions, name: str, snapshot_id: int) -> None:
    """Java ``validateNoAutoTag``: an automatic tag's name on a snapshot that has one."""
    if options.tag_automatic_creation not in ("process-time", "watermark"):
        return
    period = tag_period(options)
    if not period.is_auto(name):
        return
    state = TagState({t.name: t.snapshot.id for t in list_tags(table)}, period)
    existing = state.auto_by_snapshot().get(snapshot_id)
    if existing:
        raise UnsupportedError(f"snapshot {snapshot_id} is already auto-tagged with {existing}; "
                               f"not replacing tag {name!r}")


def replace_tag(table: Table, *, clock: Clock, name: str, snapshot_id: int | None = None,
                time_retained_ms: int | None = None, dry_run: bool = False) -> ReplaceTagResult:
    """Make the existing tag ``name`` pin ``snapshot_id`` (default the latest) with
    ``time_retained_ms`` (default none). Raises ConfigError naming the missing tag or
    snapshot, or when the tag changed meanwhile."""
    check_tag_name(name)
    options = table.options()
    check_tag_options(options, creating=False)
    old = read_tag(table, name)
    if old is None:
        raise ConfigError("tag", f"tag {name!r} of {table.name} does not exist")
    if snapshot_id is None:
        source = latest_snapshot(table)
        if source is None:
            raise ConfigError("snapshot", f"{table.name} has no snapshot to tag")
    else:
        source = find_snapshot(table, snapshot_id)
        if source is None:
            raise ConfigError("snapshot", f"snapshot {snapshot_id} of {table.name} does not "
                                          "exist (nor does a tag hold it)")
    new_id = source.snapshot.id
    _check_no_auto_tag(table, options, name, new_id)
    retained_ns = None if time_retained_ms is None else time_retained_ms * _NS_PER_MS
    file_only = old.snapshot.id == new_id or table.snapshots.exists(old.snapshot.id)
    result = ReplaceTagResult(table.name, name, old.snapshot.id, new_id, source.tag,
                              retained_ns, file_only, dry_run=dry_run)
    if dry_run:
        if file_only:
            return result
        return dataclasses.replace(result, files=preview_tag_deletion(table, name, old.snapshot))
    clean_dead_jobs(table, clock.wall_ms())  # a killed replacement's or deletion's files
    data = encode_tag(source.snapshot, clock.local_now(), retained_ns)
    files = FileTally()
    if old.snapshot.id == new_id:
        table.storage.write_bytes(tag_path(table, name), data)
    else:
        deleted = delete_tag_with_files(table, name, old.snapshot.id, clock, replacement=data)
        if deleted is None:
            raise ConfigError("tag", f"tag {name!r} of {table.name} changed meanwhile; "
                                     "not replaced")
        files = deleted.files
    if not still_there(table, source):
        delete_tag_file(table, name)
        raise ConfigError("snapshot", f"{source.describe()} went away while tag {name!r} was "
                                      "replaced; the tag is deleted")
    return dataclasses.replace(result, files=files)
