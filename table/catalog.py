"""Tables of a filesystem warehouse: Java ``FileSystemCatalog``, ``SchemaManager``,
``TagManager``, ``ConsumerManager``, ``BranchManager`` (read side).

A warehouse holds ``<db>.db/<table>/`` directories; a directory is a table when it has a
``schema/`` directory with at least one ``schema-<id>`` file. A branch is a table of its own,
named as Paimon names it (``db.t$branch_<name>``): its snapshots, schemas, tags, consumers and
changelogs live under ``<table>/branch/branch-<name>/``, its data files and manifests in the
table's folders.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from paimond.errors import CodecError, ConfigError, CorruptFileError, MissingFileError
from paimond.format.meta.schema import TableSchema, decode_schema
from paimond.format.meta.snapshot import Snapshot, decode_snapshot
from paimond.table.catalogs.catalog_storage import CatalogStorage
from paimond.table.layout import (
    BRANCH_DIR,
    BRANCH_PREFIX,
    BRANCH_SUFFIX,
    CONSUMER_DIR,
    CONSUMER_PREFIX,
    DB_SUFFIX,
    MAIN_BRANCH,
    SCHEMA_DIR,
    SCHEMA_PREFIX,
    SNAPSHOT_DIR,
    TAG_DIR,
    TAG_PREFIX,
)
from paimond.table.options.core import TableOptions
from paimond.table.snapshots import Snapshots, parse_numbered_name
from paimond.table.storage.interface import Storage, StorageLocation

WATCH_FULL_CHECK_EVERY = 30  # idle checks per full one: 5 minutes at a 10 s check interval


def split_branch(name: str) -> tuple[str, str]:
    """``db.t$branch_b`` -> (``db.t``, ``b``); ``db.t`` -> (``db.t``, ``main``)."""
    table, sep, branch = name.partition(BRANCH_SUFFIX)
    return (table, branch) if sep else (name, MAIN_BRANCH)


def branch_table_name(table: str, branch: str) -> str:
    """The name of ``branch`` of the table ``table`` (``db.t``): Paimon's ``db.t$branch_b``,
    or ``table`` itself for the main branch."""
    return table if branch == MAIN_BRANCH else f"{table}{BRANCH_SUFFIX}{branch}"


def check_branch_name(branch: str) -> str:
    """``branch`` if Paimon accepts it as a new branch's name (Java ``BranchManager
    .validateBranch``, and a name that fits in one path segment); else ConfigError."""
    if branch == MAIN_BRANCH:
        raise ConfigError("branch", f"{MAIN_BRANCH!r} is the default branch and cannot be used")
    if not branch.strip():
        raise ConfigError("branch", f"branch name {branch!r} is blank")
    if branch.isdigit():
        raise ConfigError("branch", f"branch name cannot be a number, got {branch!r}")
    if "/" in branch or BRANCH_SUFFIX in branch:
        raise ConfigError("branch", f"branch name {branch!r} holds '/' or {BRANCH_SUFFIX!r}")
    return branch


@dataclass
class Table:
    """One table on storage, or one branch of it (``name`` ``db.t$branch_b``; ``path`` is the
    table's directory either way). Schemas are cached by id (schema files are immutable)."""

    storage: Storage
    path: str
    name: str
    _schemas: dict[int, TableSchema] = field(default_factory=dict, repr=False)
    _watched: tuple[int | None, int] = field(default=(None, 0), repr=False, compare=False)

    @property
    def location(self) -> StorageLocation:
        """Where the table's storage is: a worker reopens it from this alone."""
        return self.storage.location

    @property
    def branch(self) -> str:
        return split_branch(self.name)[1]

    @property
    def meta_path(self) -> str:
        """The directory of this branch's snapshots, schemas, tags, consumers and changelogs:
        the table's own for the main branch."""
        branch = self.branch
        if branch == MAIN_BRANCH:
            return self.path
        return self.storage.join(self.path, BRANCH_DIR, BRANCH_PREFIX + branch)

    def meta_file_path(self, *parts: str) -> str:
        return self.storage.join(self.meta_path, *parts)

    def on_branch(self, branch: str) -> Table:
        """The same table seen on ``branch`` (``main`` for the main branch)."""
        return Table(self.storage, self.path,
                     branch_table_name(split_branch(self.name)[0], branch))

    @property
    def snapshots(self) -> Snapshots:
        return Snapshots(self.storage, self.meta_path)

    def watched_latest_id(self) -> int | None:
        """The latest snapshot id, for a watcher polling the table (the daemon's checks): one
        read of ``LATEST`` while it names the id found the last time; the full check (Java's
        hint verification) the first time, whenever the hint moved, and every
        ``WATCH_FULL_CHECK_EVERY``-th call, so a hint a dead writer left behind is caught."""
        known, calls = self._watched
        latest = (self.snapshots.latest_id() if calls == 0
                  else self.snapshots.latest_id_since(known))
        self._watched = (latest, (calls + 1) % WATCH_FULL_CHECK_EVERY)
        return latest

    def file_path(self, *parts: str) -> str:
        return self.storage.join(self.path, *parts)

    def schema_ids(self) -> list[int]:
        listing = self.storage.list_dir(self.meta_file_path(SCHEMA_DIR))
        ids = (parse_numbered_name(s.name, SCHEMA_PREFIX) for s in listing if not s.is_dir)
        return sorted(i for i in ids if i is not None)

    def has_schema_after(self, schema_id: int) -> bool:
        """Whether a schema newer than ``schema_id`` was committed: one lookup of the next
        id's file (Paimon numbers schemas one after the other), not a listing."""
        return self.storage.is_file(
            self.meta_file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}{schema_id + 1}"))

    def schema(self, schema_id: int) -> TableSchema:
        cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        path = self.meta_file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}{schema_id}")
        try:
            schema = decode_schema(self.storage.read_bytes(path))
        except CodecError as error:
            raise CorruptFileError(path, error.reason) from None
        if schema.id != schema_id:
            raise CorruptFileError(path, f"holds schema id {schema.id}, expected {schema_id}")
        self._schemas[schema_id] = schema
        return schema

    def latest_schema(self) -> TableSchema:
        ids = self.schema_ids()
        if not ids:
            raise MissingFileError(self.meta_file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}0"))
        return self.schema(ids[-1])

    def options(self) -> TableOptions:
        return TableOptions.of(self.latest_schema())

    def tags(self) -> dict[str, Snapshot]:
        """Tag name -> the snapshot it pins."""
        tags = {}
        for status in self.storage.list_dir(self.meta_file_path(TAG_DIR)):
            if status.is_dir or not status.name.startswith(TAG_PREFIX):
                continue
            try:
                tags[status.name[len(TAG_PREFIX):]] = decode_snapshot(
                    self.storage.read_bytes(status.path))
            except CodecError as error:
                raise CorruptFileError(status.path, error.reason) from None
        return dict(sorted(tags.items()))

    def consumers(self) -> dict[str, int]:
        """Consumer id -> the next snapshot it will read (it protects that one and later)."""
        consumers = {}
        for status in self.storage.list_dir(self.meta_file_path(CONSUMER_DIR)):
            if status.is_dir or not status.name.startswith(CONSUMER_PREFIX):
                continue
            try:
                consumers[status.name[len(CONSUMER_PREFIX):]] = int(
                    json.loads(self.storage.read_bytes(status.path))["nextSnapshot"])
            except (ValueError, KeyError, TypeError) as error:
                raise CorruptFileError(status.path, f"invalid consumer JSON: {error}") from None
        return dict(sorted(consumers.items()))

    def branches(self) -> list[str]:
        """The table's branches other than main, whichever branch this is."""
        listing = self.storage.list_dir(self.file_path(BRANCH_DIR))
        return sorted(s.name[len(BRANCH_PREFIX):] for s in listing
                      if s.is_dir and s.name.startswith(BRANCH_PREFIX))


def open_table(storage: Storage, warehouse: str, name: str, branch: str | None = None) -> Table:
    """Open ``db.table`` of a warehouse, or one of its branches (``db.table$branch_b``, or
    ``branch``). ConfigError for a name that is not ``DB.TABLE``, for a table that is not
    there (nothing under its directory) and for a branch it does not have; MissingFileError
    for a table whose directory has files but no schema."""
    base, named = split_branch(name)
    database, _, table_name = base.partition(".")
    if not database or not table_name or "/" in base:
        raise ConfigError("--table", f"a table name is DB.TABLE, got {name!r}")
    if branch is not None and named != MAIN_BRANCH and branch != named:
        raise ConfigError("--branch", f"{name} names branch {named!r}, --branch {branch!r}")
    branch = named if branch is None else branch
    path = (storage.table_path(warehouse, base) if isinstance(storage, CatalogStorage)
            else storage.join(warehouse, database + DB_SUFFIX, table_name))
    main = Table(storage.for_table(path) if isinstance(storage, CatalogStorage) else storage,
                 path, base)
    if not main.schema_ids():
        if not main.storage.list_dir(main.path):
            raise ConfigError("--table", f"table {base} not found in {warehouse}")
        raise MissingFileError(main.file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}0"))
    if branch == MAIN_BRANCH:
        return main
    table = main.on_branch(branch)
    if not table.schema_ids():
        if not table.storage.list_dir(table.meta_path):
            known = ", ".join(main.branches()) or "none"
            raise ConfigError("--branch", f"table {base} has no branch {branch!r} "
                                          f"(its branches: {known})")
        raise MissingFileError(table.meta_file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}0"))
    return table


def check_warehouse(storage: Storage) -> None:
    """ConfigError naming the warehouse when its root is not there: a local directory that
    does not exist, or an S3 bucket that does not exist. An existing empty warehouse passes
    (an S3 prefix with no objects is an empty warehouse: S3 has no directories).
    StorageUnavailableError when the store cannot be asked."""
    root = storage.root
    scheme, sep, rest = root.partition("://")
    if sep and scheme in ("s3", "s3a"):
        bucket = rest.split("/", 1)[0]
        if not storage.exists(f"{scheme}://{bucket}"):
            raise ConfigError("warehouse", f"{root}: bucket {bucket!r} does not exist")
        return
    if not storage.exists(root):
        raise ConfigError("warehouse", f"{root} does not exist")


def list_tables(storage: Storage, warehouse: str,
                wants: Callable[[str], bool] | None = None,
                known: Collection[str] = (), *, branches: bool = False,
                known_branches: bool = True) -> list[Table]:
    """Every table of the warehouse (that ``wants`` its ``db.table`` name), sorted by name;
    with ``branches``, each table's branches too (``db.table$branch_b``, after the table).

    A directory counts as a table when it has a ``schema/`` or ``snapshot/`` directory, so a
    table whose schema files were lost is still listed (and reported unreadable). A name
    ``wants`` declines is not listed at all, nor is a ``known`` table (one seen to be a table
    before: a watcher's) whose directory is still there: one request saved per table. A known
    table's ``branch/`` folder is listed each time (a branch may have been created since)
    unless not ``known_branches`` (its branches are then left out); a new table's only when
    it has one.

    A warehouse of a catalog (``table.catalogs``) lists the catalog's tables instead, each
    where the catalog says (``<warehouse>/<database>.db/<table>`` but for a REST catalog's
    own paths).
    """
    if isinstance(storage, CatalogStorage):
        return _catalog_tables(storage, warehouse, wants, branches=branches)
    tables = []
    for database in storage.list_dir(warehouse):
        if not database.is_dir or not database.name.endswith(DB_SUFFIX):
            continue
        db_name = database.name[: -len(DB_SUFFIX)]
        for candidate in storage.list_dir(database.path):
            name = f"{db_name}.{candidate.name}"
            if not candidate.is_dir or (wants is not None and not wants(name)):
                continue
            table = Table(storage, candidate.path, name)
            if name in known:
                tables.append(table)
                if branches and known_branches:
                    tables += [table.on_branch(b) for b in table.branches()]
                continue
            children = {s.name for s in storage.list_dir(candidate.path) if s.is_dir}
            if children & {SCHEMA_DIR, SNAPSHOT_DIR}:
                tables.append(table)
                if branches and BRANCH_DIR in children:
                    tables += [table.on_branch(b) for b in table.branches()]
    return sorted(tables, key=lambda t: t.name)


def _catalog_tables(storage: CatalogStorage, warehouse: str,
                    wants: Callable[[str], bool] | None, *, branches: bool) -> list[Table]:
    tables = []
    for name, path in storage.tables(warehouse):
        if wants is not None and not wants(name):
            continue
        table = Table(storage.for_table(path), path, name)
        tables.append(table)
        if branches and storage.exists(table.file_path(BRANCH_DIR)):
            tables += [table.on_branch(b) for b in table.branches()]
    return sorted(tables, key=lambda t: t.name)
