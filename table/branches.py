"""Creating and deleting a table's branches: Java ``FileSystemBranchManager`` (Paimon 2.x).

A branch is a directory ``<table>/branch/branch-<name>/`` with its own ``schema/``,
``snapshot/``, ``tag/``, ``consumer/`` and ``changelog/``; it shares the table's data files and
manifests. Creating one copies files, it never writes a data file:

- from a tag: the schemas up to the tag's snapshot's, the tag itself, and the tag's snapshot
  (the main branch's file when it still exists, else the tag's JSON trimmed to a snapshot);
  the branch's copy of the tag then keeps that snapshot's files through the branch's own
  expirations, as in Java;
- empty: the schemas up to the latest, and no snapshot.

The files are written in that order (schemas first): a crash leaves a branch that is empty or
holds its first snapshot, never a snapshot without its schema. Deleting a branch deletes its
directory only (Java ``dropBranch``): data files no one else references are orphan removal's,
once the branch's files are gone. Renaming one moves its directory's files (Java
``renameBranch`` renames the directory, which object stores cannot do).

Fast-forwarding the main branch to a branch (Java ``fastForward``) replaces the main branch's
history from the branch's earliest snapshot on with the branch's: the main branch's snapshots
from that id and its tags on those snapshots are deleted (newest first), the branch's schemas
written over the main branch's of the same id, the branch's snapshots and tags copied in
(oldest first), and last the main branch's schemas from that snapshot's schema on that the
branch lacks are deleted. It is the one place a snapshot id of the main branch is written
again, as in Java. No data file is deleted: those only the replaced snapshots used are orphan
removal's. A crash in between leaves the main branch at a whole snapshot, an older one or one
of the branch's, whose schema is there (Java deletes the schemas before copying, so a crash
there leaves a table without its schema); running it again completes it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from paimond.errors import ConfigError
from paimond.faults import crash_point
from paimond.format.meta.snapshot import TAG_CREATE_TIME, TAG_TIME_RETAINED, encode_snapshot
from paimond.table.catalog import Table, check_branch_name
from paimond.table.layout import (
    BRANCH_DIR,
    BRANCH_PREFIX,
    CHANGELOG_DIR,
    CONSUMER_DIR,
    EARLIEST_HINT,
    LATEST_HINT,
    MAIN_BRANCH,
    SCHEMA_DIR,
    SCHEMA_PREFIX,
    SNAPSHOT_DIR,
    TAG_DIR,
)
from paimond.table.tags import read_tag, tag_path

# A branch's folders, whose files are deleted in this order: what protects files (snapshots,
# changelogs, tags, consumers) before the schemas, so a half-deleted branch still has a schema
# to be read with; anything else in the branch's directory last.
_BRANCH_FOLDERS = (SNAPSHOT_DIR, CHANGELOG_DIR, TAG_DIR, CONSUMER_DIR, SCHEMA_DIR)


@dataclass(frozen=True, slots=True)
class BranchCreation:
    """What creating a branch writes (or would, in a dry run)."""

    table: str
    branch: str
    tag: str | None
    snapshot_id: int | None
    schema_ids: tuple[int, ...]
    dry_run: bool

    def describe(self) -> str:
        verb = "would create" if self.dry_run else "created"
        source = (f"from tag {self.tag} (snapshot {self.snapshot_id})" if self.tag
                  else "empty (no snapshot yet)")
        return (f"{self.table}: {verb} branch {self.branch} {source}, with schemas "
                f"{', '.join(map(str, self.schema_ids))}")


@dataclass(frozen=True, slots=True)
class BranchDeletion:
    table: str
    branch: str
    files: int
    dry_run: bool

    def describe(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (f"{self.table}: {verb} branch {self.branch} ({self.files} metadata files); its "
                "data files stay until `paimond remove-orphans` finds no one uses them")


def _main(table: Table) -> Table:
    if table.branch != MAIN_BRANCH:
        raise ConfigError("--table", f"{table.name} is a branch: branches are created from "
                                     "and deleted on the main branch's table")
    return table


def _branch_exists(table: Table, branch: str) -> bool:
    return table.storage.exists(table.file_path(BRANCH_DIR, BRANCH_PREFIX + branch))


def create_branch(table: Table, branch: str, tag: str | None = None, *,
                  dry_run: bool = False) -> BranchCreation:
    """Create ``branch`` of ``table`` (its main branch), from ``tag`` or empty. ConfigError
    for a name Paimon refuses, a branch that exists, or a tag that does not."""
    main = _main(table)
    check_branch_name(branch)
    if _branch_exists(main, branch):
        raise ConfigError("branch", f"{main.name} already has a branch {branch!r}")
    target = main.on_branch(branch)
    if tag is None:
        schema_ids = tuple(main.schema_ids())
        if not dry_run:
            _copy_schemas(main, target, schema_ids)
        return BranchCreation(main.name, branch, None, None, schema_ids, dry_run)
    found = read_tag(main, tag)
    if found is None:
        known = ", ".join(main.tags()) or "none"
        raise ConfigError("tag", f"{main.name} has no tag {tag!r} (its tags: {known})")
    snapshot = found.snapshot
    schema_ids = tuple(i for i in main.schema_ids() if i <= snapshot.schema_id)
    if not dry_run:
        _copy_schemas(main, target, schema_ids)
        storage = main.storage
        storage.write_bytes(tag_path(target, tag), storage.read_bytes(tag_path(main, tag)))
        if main.snapshots.exists(snapshot.id):
            data = storage.read_bytes(main.snapshots.path(snapshot.id))
        else:  # expired meanwhile: the tag kept its content (Java writes it from the tag)
            extra = {k: v for k, v in snapshot.extra.items()
                     if k not in (TAG_CREATE_TIME, TAG_TIME_RETAINED)}
            data = encode_snapshot(dataclasses.replace(snapshot, extra=extra))
        storage.write_bytes(target.snapshots.path(snapshot.id), data)
    return BranchCreation(main.name, branch, tag, snapshot.id, schema_ids, dry_run)


def _copy_schemas(main: Table, target: Table, schema_ids: tuple[int, ...]) -> None:
    storage = main.storage
    for schema_id in schema_ids:
        name = f"{SCHEMA_PREFIX}{schema_id}"
        storage.write_bytes(target.meta_file_path(SCHEMA_DIR, name),
                            storage.read_bytes(main.meta_file_path(SCHEMA_DIR, name)))


def delete_branch(table: Table, branch: str, *, dry_run: bool = False) -> BranchDeletion:
    """Delete ``branch``'s directory (its snapshots, changelogs, tags, consumers, schemas);
    ConfigError when the table has no such branch."""
    main = _main(table)
    if branch == MAIN_BRANCH or not _branch_exists(main, branch):
        known = ", ".join(main.branches()) or "none"
        raise ConfigError("branch", f"{main.name} has no branch {branch!r} (its branches: {known})")
    target = main.on_branch(branch)
    files, folders = _below(main, target.meta_path)
    # what protects files (snapshots, changelogs, tags, consumers) before the rest
    order = {folder: rank for rank, folder in enumerate(_BRANCH_FOLDERS)}
    files.sort(key=lambda path: order.get(path[len(target.meta_path):].strip("/").split("/")[0],
                                          len(order)))
    if not dry_run:
        for path in files:
            main.storage.delete(path)
        for folder in [*folders, target.meta_path]:  # deepest first
            main.storage.delete_dir_if_empty(folder)
    return BranchDeletion(main.name, branch, len(files), dry_run)


def _below(table: Table, directory: str) -> tuple[list[str], list[str]]:
    """The files and folders under ``directory``; folders deepest first."""
    files, folders = [], []
    for status in table.storage.list_dir(directory):
        if status.is_dir:
            inner_files, inner_folders = _below(table, status.path)
            files += inner_files
            folders += [*inner_folders, status.path]
        else:
            files.append(status.path)
    return files, folders


@dataclass(frozen=True, slots=True)
class BranchRename:
    table: str
    branch: str
    to: str
    files: int
    resumed: bool  # an interrupted rename completed
    dry_run: bool

    def describe(self) -> str:
        verb = "would rename" if self.dry_run else "renamed"
        again = " (completing an interrupted rename)" if self.resumed else ""
        return f"{self.table}: {verb} branch {self.branch} to {self.to}{again}, {self.files} files"


RENAME_MARKER = ".paimond-rename"  # in the new branch's directory while a rename runs


def rename_branch(table: Table, branch: str, to: str, *, dry_run: bool = False) -> BranchRename:
    """Rename ``branch`` to ``to`` (Java ``renameBranch``). ConfigError for the main branch, a
    missing branch, a name Paimon refuses or one that exists.

    Object stores cannot rename a directory, so the branch's files are copied (schemas first,
    snapshots and their hints last), then the old ones deleted in reverse; a marker file in the
    new directory, naming the old branch, is written first and deleted last. A crash leaves
    the old branch whole or the new one whole; run again, the rename completes."""
    main = _main(table)
    if branch == MAIN_BRANCH:
        raise ConfigError("branch", "the main branch cannot be renamed")
    check_branch_name(to)
    source, target = main.on_branch(branch), main.on_branch(to)
    storage = main.storage
    marker = storage.join(target.meta_path, RENAME_MARKER)
    resumed = _branch_exists(main, to) and storage.exists(marker) and \
        storage.read_text(marker) == branch
    if not _branch_exists(main, branch):
        if resumed:  # killed after the old files were gone
            if not dry_run:
                storage.delete(marker)
            return BranchRename(main.name, branch, to, 0, True, dry_run)
        known = ", ".join(main.branches()) or "none"
        raise ConfigError("branch", f"{main.name} has no branch {branch!r} (its branches: {known})")
    if _branch_exists(main, to) and not resumed:
        raise ConfigError("branch", f"{main.name} already has a branch {to!r}")
    old = _relative_files(main, source.meta_path)
    order = {folder: rank for rank, folder in enumerate(reversed(_BRANCH_FOLDERS))}

    def rank(relative: str) -> tuple[int, bool]:  # the hints after their snapshots
        return order.get(relative.split("/")[0], -1), relative.rsplit("/", 1)[-1] in (
            EARLIEST_HINT, LATEST_HINT)

    if not dry_run:
        storage.write_bytes(marker, branch.encode())
        for relative in sorted(old, key=rank):  # all again on a rerun: one may be cut short
            crash_point("rename_branch.file_copied")
            storage.write_bytes(storage.join(target.meta_path, relative),
                                storage.read_bytes(old[relative]))
        for relative in sorted(old, key=rank, reverse=True):
            crash_point("rename_branch.file_deleted")
            storage.delete(old[relative])
        for folder in [*_below(main, source.meta_path)[1], source.meta_path]:
            storage.delete_dir_if_empty(folder)
        storage.delete(marker)
    return BranchRename(main.name, branch, to, len(old), resumed, dry_run)


def _relative_files(table: Table, directory: str) -> dict[str, str]:
    """The files under ``directory`` by their path relative to it."""
    return {path[len(directory):].strip("/"): path for path in _below(table, directory)[0]}


@dataclass(frozen=True, slots=True)
class FastForward:
    """What fast-forwarding the main branch to a branch replaces (or would, in a dry run)."""

    table: str
    branch: str
    from_snapshot: int
    replaced_snapshots: tuple[int, ...]
    replaced_schemas: tuple[int, ...]
    deleted_tags: tuple[str, ...]
    copied_snapshots: tuple[int, ...]
    copied_schemas: tuple[int, ...]
    copied_tags: tuple[str, ...]
    dry_run: bool

    def describe(self) -> str:
        verb = "would fast-forward" if self.dry_run else "fast-forwarded"
        replaced = (f"snapshots {_span(self.replaced_snapshots)} of the main branch replaced"
                    if self.replaced_snapshots else "no snapshot of the main branch replaced")
        lines = [f"{self.table}: {verb} the main branch to branch {self.branch} from snapshot "
                 f"{self.from_snapshot}: {replaced}; snapshots {_span(self.copied_snapshots)} "
                 f"copied",
                 f"  schemas replaced: {_span(self.replaced_schemas)}; copied: "
                 f"{_span(self.copied_schemas)}",
                 f"  tags deleted: {', '.join(self.deleted_tags) or 'none'}; copied: "
                 f"{', '.join(self.copied_tags) or 'none'}"]
        if self.replaced_snapshots:
            lines.append("  data files only the replaced snapshots used stay until "
                         "`paimond remove-orphans` finds no one uses them")
        return "\n".join(lines)


def _span(ids: tuple[int, ...]) -> str:
    if not ids:
        return "none"
    return str(ids[0]) if len(ids) == 1 else f"{ids[0]}..{ids[-1]} ({len(ids)})"


def fast_forward(table: Table, branch: str, *, dry_run: bool = False) -> FastForward:
    """Make ``branch``'s history the main branch's from the branch's earliest snapshot on.
    ConfigError for a branch the table does not have, or one without a snapshot."""
    main = _main(table)
    if branch == MAIN_BRANCH or not _branch_exists(main, branch):
        known = ", ".join(main.branches()) or "none"
        raise ConfigError("branch", f"{main.name} has no branch {branch!r} (its branches: {known})")
    source = main.on_branch(branch)
    source_ids = source.snapshots.list_ids()
    if not source_ids:
        raise ConfigError("branch", f"branch {branch} of {main.name} has no snapshot: nothing "
                                    "to fast-forward to")
    earliest = source_ids[0]
    schema_from = source.snapshots.load(earliest).schema_id
    replaced = tuple(i for i in main.snapshots.list_ids() if i >= earliest)
    replaced_schemas = tuple(i for i in main.schema_ids() if i >= schema_from)
    deleted_tags = tuple(name for name, tag in main.tags().items() if tag.id >= earliest)
    source_tags = tuple(source.tags())
    plan = FastForward(main.name, branch, earliest, replaced, replaced_schemas, deleted_tags,
                       tuple(source_ids), tuple(source.schema_ids()), source_tags, dry_run)
    if dry_run:
        return plan
    storage = main.storage
    storage.delete(main.snapshots.hint_path(LATEST_HINT))
    for snapshot_id in reversed(replaced):  # newest first: the latest left is always whole
        crash_point("fast_forward.snapshot_deleted")
        storage.delete(main.snapshots.path(snapshot_id))
    for name in deleted_tags:
        crash_point("fast_forward.tag_deleted")
        storage.delete(tag_path(main, name))
    # The branch's schemas are written over the main branch's of the same id (an atomic
    # replace: the snapshots left name schemas that stay readable throughout), and the main
    # branch's schemas the branch lacks go last, once no snapshot names them.
    for schema_id in plan.copied_schemas:
        crash_point("fast_forward.schema_copied")
        name = f"{SCHEMA_PREFIX}{schema_id}"
        storage.write_bytes(main.meta_file_path(SCHEMA_DIR, name),
                            storage.read_bytes(source.meta_file_path(SCHEMA_DIR, name)))
    for snapshot_id in source_ids:  # oldest first: the latest is always whole
        crash_point("fast_forward.snapshot_copied")
        storage.write_bytes(main.snapshots.path(snapshot_id),
                            storage.read_bytes(source.snapshots.path(snapshot_id)))
    for name in source_tags:
        storage.write_bytes(tag_path(main, name), storage.read_bytes(tag_path(source, name)))
    for schema_id in reversed(replaced_schemas):
        if schema_id not in plan.copied_schemas:
            crash_point("fast_forward.schema_deleted")
            storage.delete(main.meta_file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}{schema_id}"))
    hint = main.snapshots.read_hint(EARLIEST_HINT)
    first = main.snapshots.list_ids()[0]
    if hint is not None and hint != first:  # a hint past snapshots now there would hide them
        storage.write_bytes(main.snapshots.hint_path(EARLIEST_HINT), str(first).encode())
    return plan
