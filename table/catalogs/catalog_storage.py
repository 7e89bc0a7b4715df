"""A warehouse registered in a Paimon catalog: its tables are the catalog's, and each snapshot
commit goes the catalog's way. A JDBC or Hive catalog with its lock enabled: under the lock,
the snapshot file must not exist yet, then it is written (Java ``RenamingSnapshotCommit``). A
REST catalog: the snapshot is committed through the server (Java ``CatalogSnapshotCommit``),
which writes the file. Every other operation is the storage's own."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping

from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.errors import ConfigError, UnsupportedError
from paimond.format.meta.snapshot import decode_snapshot
from paimond.table.catalogs.commit_statistics import delta_statistics
from paimond.table.catalogs.data_token import TokenStorage
from paimond.table.catalogs.hive import HiveCatalog, HiveCatalogConfig
from paimond.table.catalogs.jdbc import JdbcCatalog, JdbcCatalogConfig
from paimond.table.catalogs.rest import RestCatalog, RestCatalogConfig
from paimond.table.layout import BRANCH_DIR, BRANCH_PREFIX, DB_SUFFIX, SNAPSHOT_DIR, SNAPSHOT_PREFIX
from paimond.table.storage.delegating import DelegatingStorage
from paimond.table.storage.interface import Storage
from paimond.table.storage.schemes import scheme_of

OBJECT_STORES = frozenset({"s3", "s3a", "s3n", "oss", "gs", "gcs", "abfs", "abfss", "az"})
CATALOGS = ("filesystem", "hive", "jdbc", "rest")
# Where each catalog's secret comes from: never the options, never a file.
SECRET_ENV = {"jdbc": "PAIMOND_JDBC_PASSWORD", "rest": "PAIMOND_REST_TOKEN"}
SECRET_OPTION = {"jdbc": "jdbc.password", "rest": "token"}
Catalog = JdbcCatalog | RestCatalog | HiveCatalog
LOCK_DATABASE = "paimond"  # the database part of the locks of files that are no snapshots


class CatalogStorage(DelegatingStorage):
    """``inner`` with ``catalog``'s tables and its way to commit a snapshot (``locked``: a
    JDBC or Hive catalog's commits take its lock)."""

    def __init__(self, inner: Storage, catalog: Catalog, *, locked: bool = False,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(inner)
        self.catalog, self.locked, self.clock = catalog, locked, clock
        # a REST or Hive table's directory -> its name (those catalogs say where tables are)
        self._owners: dict[str, tuple[str, str]] = {}
        self._tables: dict[str, CatalogStorage] = {}  # a table's directory -> its token storage

    def for_table(self, path: str) -> Storage:
        """The storage of the table at ``path`` (a directory :meth:`tables` gave): this one,
        or, when the REST catalog hands out data tokens, one that reads and writes the table's
        files (and commits its snapshots) with the table's token (``data_token.py``)."""
        if not isinstance(self.catalog, RestCatalog) or not self.catalog.data_tokens:
            return self
        found = self._tables.get(path)
        if found is None:
            owner = self._table_of(path)
            assert owner is not None  # a REST catalog's table, or a ConfigError
            fetch = functools.partial(self.catalog.table_token, *owner)
            tokened = TokenStorage(".".join(owner), path, self._inner.location.options, fetch,
                                   self.clock)
            found = CatalogStorage(tokened, self.catalog, clock=self.clock)
            found._owners = self._owners
            self._tables[path] = found
        return found

    def snapshot_owner(self, path: str) -> tuple[str, str] | None:
        """(database, object name) of the table whose snapshot file ``path`` is (the object
        name with ``$branch_<b>`` for a branch); None for any other file. A REST or Hive
        catalog's snapshot file of a table it does not list is a ConfigError: it is never
        written around the server or without the lock."""
        meta, _, file_name = path.rstrip("/").rpartition("/")
        meta, _, folder = meta.rpartition("/")
        if folder != SNAPSHOT_DIR or not file_name.startswith(SNAPSHOT_PREFIX):
            return None
        table_dir, branch = meta, None
        parent, _, leaf = meta.rpartition("/")
        if leaf.startswith(BRANCH_PREFIX) and parent.rpartition("/")[2] == BRANCH_DIR:
            table_dir, branch = parent.rpartition("/")[0], leaf[len(BRANCH_PREFIX):]
        owner = self._table_of(table_dir)
        if owner is None:
            return None
        database, table = owner
        return database, table if branch is None else f"{table}$branch_{branch}"

    def _table_of(self, table_dir: str) -> tuple[str, str] | None:
        if not isinstance(self.catalog, JdbcCatalog):
            if table_dir not in self._owners:
                self.tables(self.root)
            if table_dir not in self._owners:
                kind = "REST" if isinstance(self.catalog, RestCatalog) else "Hive"
                raise ConfigError("catalog", f"{table_dir} is no table of the {kind} catalog "
                                             f"{self.catalog.config.uri}: its snapshots are "
                                             "committed through the catalog only")
            return self._owners[table_dir]
        database_dir, _, table = table_dir.rpartition("/")
        database = database_dir.rpartition("/")[2]
        if not database.endswith(DB_SUFFIX) or not table:
            return None
        return database[:-len(DB_SUFFIX)], table

    def tables(self, warehouse: str) -> list[tuple[str, str]]:
        """(``db.table``, its directory) of every table of the catalog, sorted by name: where
        a REST catalog's server or the Hive metastore says the table is, else
        ``<warehouse>/<db>.db/<table>``."""
        if not isinstance(self.catalog, JdbcCatalog):
            found = [(t.database, t.name, self._local_form(t.path)) for t in self.catalog.tables()]
            self._owners.update({path: (database, name) for database, name, path in found})
            return [(f"{database}.{name}", path) for database, name, path in found]
        return [(name, self.table_path(warehouse, name)) for name in self.catalog.table_names()]

    def _local_form(self, path: str) -> str:
        """A catalog's table path as this storage names it: ``file:/x`` is ``/x`` locally, and
        Hadoop's ``s3a://``/``s3n://`` are ``s3://`` on an ``s3://`` warehouse."""
        if "://" not in self.root and path.startswith("file:"):
            return "/" + path[len("file:"):].lstrip("/")
        scheme, _, rest = path.partition("://")
        root_scheme = self.root.partition("://")[0]
        if rest and root_scheme == "s3" and scheme in ("s3a", "s3n"):
            return f"s3://{rest}".rstrip("/")
        return path.rstrip("/")

    def table_path(self, warehouse: str, name: str) -> str:
        """The directory of table ``db.table`` (see :meth:`tables`)."""
        database, table = name.split(".", 1)
        if not isinstance(self.catalog, JdbcCatalog):
            path = self._local_form(self.catalog.table(database, table).path)
            self._owners[path] = (database, table)
            return path
        return self.join(warehouse, database + DB_SUFFIX, table)

    def write_bytes(self, path: str, data: bytes) -> None:
        """A REST catalog's snapshot files are written by its server only: copying one in
        (a branch created, renamed or fast-forwarded file by file) is refused."""
        if isinstance(self.catalog, RestCatalog) and self.snapshot_owner(path) is not None:
            raise UnsupportedError(f"writing {path} directly: the snapshots of a REST catalog's "
                                   "table are committed through its server, and paimond does "
                                   "not yet run this operation through the server")
        self._inner.write_bytes(path, data)

    def create_exclusive(self, path: str, data: bytes) -> bool:
        """Create ``path`` unless it exists. A snapshot: through a REST server, or under the
        table's lock when the catalog locks. Any other file on an object store without an
        atomic create of its own (GCS, OSS): under a lock of its directory, the catalog's lock
        then being the only thing that makes creating a file exclusive there."""
        owner = self.snapshot_owner(path)
        if owner is not None and isinstance(self.catalog, RestCatalog):
            return self._commit_through_server(path, data, *owner)
        scheme = scheme_of(self.root)
        atomic = scheme.atomic_create is not None
        if not self.locked or isinstance(self.catalog, RestCatalog) or \
                (owner is None and atomic) or not (atomic or scheme.whole_writes):
            return self._inner.create_exclusive(path, data)
        with self.catalog.lock(*(owner or _directory_lock(path))):
            if self._inner.exists(path):
                return False
            if atomic:
                return self._inner.create_exclusive(path, data)
            self._inner.write_bytes(path, data)
            return True

    def _commit_through_server(self, path: str, data: bytes, database: str, name: str) -> bool:
        assert isinstance(self.catalog, RestCatalog)
        snapshot = decode_snapshot(data)
        meta_path = path.rsplit("/", 2)[0]  # <meta>/snapshot/snapshot-<id>
        table_path = meta_path.rsplit("/", 2)[0] if "$branch_" in name else meta_path
        base = self._inner.join(meta_path, SNAPSHOT_DIR, f"{SNAPSHOT_PREFIX}{snapshot.id - 1}")
        base_uuid = None
        if snapshot.id > 1 and self._inner.exists(base):
            base_uuid = json.loads(self._inner.read_bytes(base)).get("uuid")
        statistics = delta_statistics(self._inner, table_path, meta_path, snapshot)
        return self.catalog.commit_snapshot(database, name, json.loads(data), base_uuid,
                                            statistics)


def _directory_lock(path: str) -> tuple[str, str]:
    """The lock name of a file that is no snapshot: ``paimond`` and a digest of its directory
    (one lock per directory, never a table's own, so Java's writers never wait for it)."""
    directory = path.rstrip("/").rpartition("/")[0]
    return LOCK_DATABASE, hashlib.sha256(directory.encode()).hexdigest()[:32]


def creates_under_lock(storage: Storage) -> bool:
    """Whether ``storage`` (or a storage it wraps) creates files exclusively under a catalog's
    lock, which stands in for an atomic create on an object store that has none."""
    found = _catalog_storage(storage)
    return (found is not None and found.locked and not isinstance(found.catalog, RestCatalog)
            and scheme_of(found.root).whole_writes)


def catalog_secret(options: Mapping[str, str], env: Mapping[str, str]) -> str | None:
    """The secret of the catalog ``options`` describe (JDBC password, REST token), from the
    environment variable :data:`SECRET_ENV` names for it."""
    variable = SECRET_ENV.get(_metastore(options))
    return env.get(variable) if variable else None


def _metastore(options: Mapping[str, str]) -> str:
    return options.get("metastore", "filesystem" if not options else "jdbc")


def with_catalog(storage: Storage, options: Mapping[str, str], *,
                 secret: str | None = None, clock: Clock = SYSTEM_CLOCK) -> Storage:
    """``storage`` as the warehouse of the catalog ``options`` describe (Paimon's catalog
    options; ``metastore`` ``filesystem``, the default, changes nothing; ``jdbc`` and
    ``rest``: a :class:`CatalogStorage`; ``secret``: the JDBC password or REST token, which
    the options never hold; ``clock``: when a REST catalog's data token expires).
    ConfigError for a catalog paimond does not read."""
    metastore = _metastore(options)
    if metastore == "filesystem":
        return storage
    if metastore not in CATALOGS:
        raise ConfigError("catalog metastore", f"{metastore!r}: paimond reads "
                                               f"{', '.join(CATALOGS)} catalogs")
    scheme = storage.root.split("://", 1)[0] if "://" in storage.root else "file"
    if metastore == "hive":
        hive = HiveCatalogConfig.of(options)
        locked = hive.lock_enabled if hive.lock_enabled is not None else scheme in OBJECT_STORES
        return CatalogStorage(storage, HiveCatalog(hive), locked=locked)
    option = SECRET_OPTION[metastore]
    if option in options:
        raise ConfigError(f"catalog {option}", "credentials come from the environment "
                                               f"({SECRET_ENV[metastore]}), not the options")
    if metastore == "rest":
        return CatalogStorage(storage, RestCatalog(RestCatalogConfig.of(options, secret)),
                              clock=clock)
    config = JdbcCatalogConfig.of({**options, **({option: secret} if secret else {})})
    locked = config.lock_enabled if config.lock_enabled is not None else scheme in OBJECT_STORES
    return CatalogStorage(storage, JdbcCatalog(config), locked=locked)


def _catalog_storage(storage: Storage) -> CatalogStorage | None:
    while isinstance(storage, DelegatingStorage):
        if isinstance(storage, CatalogStorage):
            return storage
        storage = storage.inner
    return None


def catalog_of(storage: Storage) -> Catalog | None:
    """The catalog ``storage`` (or a storage it wraps) is the warehouse of, if any."""
    found = _catalog_storage(storage)
    return None if found is None else found.catalog


def committed_through_server(storage: Storage) -> bool:
    """Whether ``storage`` (or a storage it wraps) commits snapshots through a REST catalog's
    server: jobs that rewrite history file by file (rollback) are refused there."""
    return isinstance(catalog_of(storage), RestCatalog)
