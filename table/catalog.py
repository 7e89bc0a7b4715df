"""Tables of a filesystem warehouse: Java ``FileSystemCatalog``, ``SchemaManager``,
``TagManager``, ``ConsumerManager``, ``BranchManager`` (read side).

A warehouse holds ``<db>.db/<table>/`` directories; a directory is a table when it has a
``schema/`` directory with at least one ``schema-<id>`` file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from paimond.errors import CodecError, ConfigError, CorruptFileError, MissingFileError
from paimond.format.meta.schema import TableSchema, decode_schema
from paimond.format.meta.snapshot import Snapshot, decode_snapshot
from paimond.table.layout import (
    BRANCH_DIR,
    BRANCH_PREFIX,
    CONSUMER_DIR,
    CONSUMER_PREFIX,
    DB_SUFFIX,
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


@dataclass
class Table:
    """One table on storage. Schemas are cached by id (schema files are immutable)."""

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
    def snapshots(self) -> Snapshots:
        return Snapshots(self.storage, self.path)

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
        listing = self.storage.list_dir(self.file_path(SCHEMA_DIR))
        ids = (parse_numbered_name(s.name, SCHEMA_PREFIX) for s in listing if not s.is_dir)
        return sorted(i for i in ids if i is not None)

    def schema(self, schema_id: int) -> TableSchema:
        cached = self._schemas.get(schema_id)
        if cached is not None:
            return cached
        path = self.file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}{schema_id}")
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
            raise MissingFileError(self.file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}0"))
        return self.schema(ids[-1])

    def options(self) -> TableOptions:
        return TableOptions.of(self.latest_schema())

    def tags(self) -> dict[str, Snapshot]:
        """Tag name -> the snapshot it pins."""
        tags = {}
        for status in self.storage.list_dir(self.file_path(TAG_DIR)):
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
        for status in self.storage.list_dir(self.file_path(CONSUMER_DIR)):
            if status.is_dir or not status.name.startswith(CONSUMER_PREFIX):
                continue
            try:
                consumers[status.name[len(CONSUMER_PREFIX):]] = int(
                    json.loads(self.storage.read_bytes(status.path))["nextSnapshot"])
            except (ValueError, KeyError, TypeError) as error:
                raise CorruptFileError(status.path, f"invalid consumer JSON: {error}") from None
        return dict(sorted(consumers.items()))

    def branches(self) -> list[str]:
        listing = self.storage.list_dir(self.file_path(BRANCH_DIR))
        return sorted(s.name[len(BRANCH_PREFIX):] for s in listing
                      if s.is_dir and s.name.startswith(BRANCH_PREFIX))


def open_table(storage: Storage, warehouse: str, name: str) -> Table:
    """Open ``db.table`` of a warehouse. ConfigError for a name that is not ``DB.TABLE`` and
    for a table that is not there (nothing under its directory); MissingFileError for a
    table whose directory has files but no schema."""
    database, _, table_name = name.partition(".")
    if not database or not table_name or "/" in name:
        raise ConfigError("--table", f"a table name is DB.TABLE, got {name!r}")
    table = Table(storage, storage.join(warehouse, database + DB_SUFFIX, table_name), name)
    if not table.schema_ids():
        if not storage.list_dir(table.path):
            raise ConfigError("--table", f"table {name} not found in {warehouse}")
        raise MissingFileError(table.file_path(SCHEMA_DIR, f"{SCHEMA_PREFIX}0"))
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
                known: Collection[str] = ()) -> list[Table]:
    """Every table of the warehouse (that ``wants`` its ``db.table`` name), sorted by name.

    A directory counts as a table when it has a ``schema/`` or ``snapshot/`` directory, so a
    table whose schema files were lost is still listed (and reported unreadable). A name
    ``wants`` declines is not listed at all, nor is a ``known`` table (one seen to be a table
    before: a watcher's) whose directory is still there: one request saved per table.
    """
    tables = []
    for database in storage.list_dir(warehouse):
        if not database.is_dir or not database.name.endswith(DB_SUFFIX):
            continue
        db_name = database.name[: -len(DB_SUFFIX)]
        for candidate in storage.list_dir(database.path):
            if not candidate.is_dir or (wants is not None
                                        and not wants(f"{db_name}.{candidate.name}")):
                continue
            if f"{db_name}.{candidate.name}" in known:
                tables.append(Table(storage, candidate.path, f"{db_name}.{candidate.name}"))
                continue
            children = {s.name for s in storage.list_dir(candidate.path) if s.is_dir}
            if children & {SCHEMA_DIR, SNAPSHOT_DIR}:
                tables.append(Table(storage, candidate.path, f"{db_name}.{candidate.name}"))
    return sorted(tables, key=lambda t: t.name)
