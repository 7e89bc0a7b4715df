"""A warehouse registered in a Paimon catalog: its tables are the catalog's, and each snapshot
commit runs under the catalog's lock when the catalog has one enabled (Java
``RenamingSnapshotCommit``: under the lock, the snapshot file must not exist yet, then it is
written). Every other operation is the storage's own."""

from __future__ import annotations

from collections.abc import Mapping

from paimond.errors import ConfigError
from paimond.table.catalogs.jdbc import JdbcCatalog, JdbcCatalogConfig
from paimond.table.layout import BRANCH_DIR, BRANCH_PREFIX, DB_SUFFIX, SNAPSHOT_DIR
from paimond.table.storage.delegating import DelegatingStorage
from paimond.table.storage.interface import Storage

OBJECT_STORES = frozenset({"s3", "s3a", "s3n", "oss", "gs", "gcs", "abfs", "abfss", "az"})
SNAPSHOT_FILE_PREFIX = "snapshot-"


class CatalogStorage(DelegatingStorage):
    """``inner`` with ``catalog``'s tables and, when ``locked``, its commit lock."""

    def __init__(self, inner: Storage, catalog: JdbcCatalog, *, locked: bool) -> None:
        super().__init__(inner)
        self.catalog, self.locked = catalog, locked

    def lock_name(self, path: str) -> tuple[str, str] | None:
        """(database, object name) of the table whose snapshot file ``path`` is; None for any
        other file."""
        root = self.root.rstrip("/") + "/"
        relative = path[len(root):] if path.startswith(root) else path
        parts = relative.strip("/").split("/")
        if len(parts) < 4 or not parts[0].endswith(DB_SUFFIX) or \
                not parts[-1].startswith(SNAPSHOT_FILE_PREFIX) or parts[-2] != SNAPSHOT_DIR:
            return None
        database, table = parts[0][:-len(DB_SUFFIX)], parts[1]
        if len(parts) == 4:
            return database, table
        if len(parts) == 6 and parts[2] == BRANCH_DIR and parts[3].startswith(BRANCH_PREFIX):
            return database, f"{table}$branch_{parts[3][len(BRANCH_PREFIX):]}"
        return None

    def create_exclusive(self, path: str, data: bytes) -> bool:
        name = self.lock_name(path) if self.locked else None
        if name is None:
            return self._inner.create_exclusive(path, data)
        with self.catalog.lock(*name):
            return not self._inner.exists(path) and self._inner.create_exclusive(path, data)


def with_catalog(storage: Storage, options: Mapping[str, str], *,
                 password: str | None = None) -> Storage:
    """``storage`` as the warehouse of the catalog ``options`` describe (Paimon's catalog
    options; ``metastore`` ``filesystem``, the default, changes nothing; ``jdbc``: a
    :class:`CatalogStorage`; ``password``: the JDBC password, which the options never hold).
    ConfigError for a catalog paimond does not read."""
    if "jdbc.password" in options:
        raise ConfigError("catalog jdbc.password", "credentials come from the environment "
                                                   "(PAIMOND_JDBC_PASSWORD), not the options")
    metastore = options.get("metastore", "filesystem" if not options else "jdbc")
    if metastore == "filesystem":
        return storage
    if metastore != "jdbc":
        raise ConfigError("catalog metastore", f"{metastore!r}: paimond reads filesystem and "
                                               "jdbc catalogs (hive and rest: not yet)")
    config = JdbcCatalogConfig.of({**options, **({"jdbc.password": password} if password
                                                 else {})})
    scheme = storage.root.split("://", 1)[0] if "://" in storage.root else "file"
    locked = config.lock_enabled if config.lock_enabled is not None else scheme in OBJECT_STORES
    return CatalogStorage(storage, JdbcCatalog(config), locked=locked)
