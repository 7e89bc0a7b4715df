"""Paimon's JDBC catalog: Java ``JdbcCatalog``, ``JdbcUtils``, ``JdbcCatalogLock`` and the
SQLite and PostgreSQL ``DistributedLockDialect``s (apache/paimon 5dacde516b).

The catalog keeps its tables' names in ``paimon_tables`` (``catalog_key``, ``database_name``,
``table_name``); a table lives at ``<warehouse>/<database>.db/<table>`` as in a filesystem
warehouse. With ``lock.enabled`` (default: on object stores, as Java's ``lockEnabled``) every
snapshot commit runs under the catalog's lock: a row ``<catalog-key>.<database>.<object>`` (the
object name with ``$branch_<b>`` for a branch) inserted into ``paimon_distributed_locks``
(``lock_id`` its primary key, ``expire_time_seconds`` the acquire timeout), retried with a
sleep doubling from 100 ms up to ``lock-check-max-sleep`` (8 s) for ``lock-acquire-timeout``
(8 min), a lock older than its expiry deleted first, the row deleted to release. Java writers
of the same catalog take the same row, so their commits and paimond's serialise.

Options, as Paimon's catalog options: ``uri`` (``jdbc:sqlite:<path>`` or
``jdbc:postgresql://host[:port]/database``), ``jdbc.user``, ``jdbc.password``,
``catalog-key`` (default ``jdbc``), ``lock.enabled``, ``lock-acquire-timeout``,
``lock-check-max-sleep``, ``lock-key-max-length`` (255). PostgreSQL needs ``pg8000``
(``pip install 'paimond[jdbc]'``); SQLite is Python's own.
"""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from paimond.durations import duration_millis
from paimond.errors import ConfigError, StorageUnavailableError

SQLITE, POSTGRESQL = "sqlite", "postgresql"
KNOWN_OPTIONS = frozenset({"metastore", "uri", "jdbc.user", "jdbc.password", "catalog-key",
                           "lock.enabled", "lock-acquire-timeout", "lock-check-max-sleep",
                           "lock-key-max-length", "warehouse"})
LOCKS_TABLE = "paimon_distributed_locks"
ACQUIRE_TIMEOUT_MS, CHECK_MAX_SLEEP_MS = 8 * 60_000, 8_000  # Java's defaults

_CREATE_LOCKS = (f"CREATE TABLE {LOCKS_TABLE}(lock_id VARCHAR(%d) NOT NULL,"
                 "acquired_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,"
                 "expire_time_seconds BIGINT DEFAULT 0 NOT NULL,PRIMARY KEY (lock_id))")
_EXPIRED = {
    SQLITE: f"DELETE FROM {LOCKS_TABLE} WHERE  strftime('%s', 'now') - strftime('%s', "
            "acquired_at) > expire_time_seconds and lock_id = ?",
    POSTGRESQL: f"DELETE FROM {LOCKS_TABLE} WHERE EXTRACT(EPOCH FROM AGE(NOW(), acquired_at))"
                " >expire_time_seconds and lock_id = ?",
}


@dataclass(frozen=True, slots=True)
class JdbcCatalogConfig:
    uri: str
    catalog_key: str = "jdbc"
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    lock_enabled: bool | None = None  # None: Java's default, on an object store
    acquire_timeout_ms: int = ACQUIRE_TIMEOUT_MS
    check_max_sleep_ms: int = CHECK_MAX_SLEEP_MS
    lock_key_max_length: int = 255

    @property
    def dialect(self) -> str:
        return SQLITE if self.uri.startswith("jdbc:sqlite:") else POSTGRESQL

    @classmethod
    def of(cls, options: Mapping[str, str]) -> JdbcCatalogConfig:
        """From Paimon's catalog options; ConfigError naming an unknown or bad one."""
        unknown = sorted(set(options) - KNOWN_OPTIONS)
        if unknown:
            raise ConfigError("catalog", f"unknown JDBC catalog option(s) {', '.join(unknown)} "
                                         f"(known: {', '.join(sorted(KNOWN_OPTIONS))})")
        uri = options.get("uri", "")
        if not (uri.startswith("jdbc:sqlite:") or uri.startswith("jdbc:postgresql://")):
            raise ConfigError("catalog uri", f"{uri!r}: paimond's JDBC catalog reads "
                                             "jdbc:sqlite:<path> and jdbc:postgresql://host/db")
        enabled = options.get("lock.enabled")
        if enabled is not None and enabled.lower() not in ("true", "false"):
            raise ConfigError("lock.enabled", f"{enabled!r} is not true or false")
        return cls(uri, options.get("catalog-key", "jdbc"), options.get("jdbc.user"),
                   options.get("jdbc.password"),
                   None if enabled is None else enabled.lower() == "true",
                   parse_duration(options, "lock-acquire-timeout", ACQUIRE_TIMEOUT_MS),
                   parse_duration(options, "lock-check-max-sleep", CHECK_MAX_SLEEP_MS),
                   int(options.get("lock-key-max-length", "255")))


def parse_duration(options: Mapping[str, str], key: str, default: int) -> int:
    text = options.get(key)
    if text is None:
        return default
    millis = duration_millis(text)
    if millis is None:
        raise ConfigError(key, f"{text!r} is not a duration (e.g. '8 s', '8 min')")
    return millis


class JdbcCatalog:
    """One JDBC catalog: its tables' names and its lock (module docstring)."""

    def __init__(self, config: JdbcCatalogConfig) -> None:
        self.config = config

    def _connect(self) -> Any:
        config = self.config
        if config.dialect == SQLITE:
            import sqlite3

            return sqlite3.connect(config.uri[len("jdbc:sqlite:"):], timeout=30,
                                   isolation_level=None)
        try:
            import pg8000.dbapi
        except ImportError:
            raise ConfigError("catalog uri", "a PostgreSQL JDBC catalog needs pg8000: pip "
                                             "install 'paimond[jdbc]'") from None
        parsed = urllib.parse.urlsplit(config.uri[len("jdbc:"):])
        return pg8000.dbapi.connect(user=config.user or "postgres", password=config.password,
                                    host=parsed.hostname or "127.0.0.1",
                                    port=parsed.port or 5432,
                                    database=parsed.path.lstrip("/") or "postgres")

    @contextlib.contextmanager
    def _cursor(self) -> Iterator[Any]:
        connection = self._connect()
        try:
            if self.config.dialect == POSTGRESQL:
                connection.autocommit = True
            cursor = connection.cursor()
            yield cursor
        finally:
            connection.close()

    def _sql(self, text: str) -> str:
        """``?`` placeholders in the driver's style (pg8000: ``%s``)."""
        if self.config.dialect == SQLITE:
            return text
        return text.replace("%", "%%").replace("?", "%s")

    def table_names(self) -> list[str]:
        """``database.table`` of every table of the catalog key, sorted."""
        try:
            with self._cursor() as cursor:
                cursor.execute(self._sql("SELECT database_name, table_name FROM paimon_tables "
                                         "WHERE catalog_key = ?"), (self.config.catalog_key,))
                return sorted(f"{database}.{table}" for database, table in cursor.fetchall())
        except ConfigError:
            raise
        except Exception as error:  # the drivers' errors have no common base
            if "paimon_tables" in str(error):
                raise ConfigError("catalog uri", f"{self.config.uri} has no paimon_tables "
                                                 "table: not a Paimon JDBC catalog") from error
            raise StorageUnavailableError(self.config.uri, f"{type(error).__name__}: "
                                                           f"{error}") from error

    def _create_locks_table(self, cursor: Any) -> None:
        try:
            cursor.execute(_CREATE_LOCKS % self.config.lock_key_max_length)
        except Exception:  # there already (Java checks the metadata first)
            pass

    def _try_acquire(self, cursor: Any, lock_id: str) -> bool:
        cursor.execute(self._sql(_EXPIRED[self.config.dialect]), (lock_id,))
        try:
            cursor.execute(self._sql(f"INSERT INTO {LOCKS_TABLE} (lock_id,expire_time_seconds) "
                                     "VALUES (?,?)"),
                           (lock_id, self.config.acquire_timeout_ms // 1000))
        except Exception:  # the row is there: someone holds the lock
            return False
        return True

    @contextlib.contextmanager
    def lock(self, database: str, name: str) -> Iterator[None]:
        """Hold the lock of table ``database.name`` (``name`` with ``$branch_<b>`` for a
        branch) as Java's ``JdbcCatalogLock.runWithLock``; StorageUnavailableError (back off,
        retry) after the acquire timeout."""
        lock_id = f"{self.config.catalog_key}.{database}.{name}"
        with self._cursor() as cursor:
            self._create_locks_table(cursor)
            acquired = self._try_acquire(cursor, lock_id)
            started, sleep_ms = time.monotonic(), 50
            while not acquired:  # Java: sleep, try again, then give up past the timeout
                sleep_ms = min(sleep_ms * 2, self.config.check_max_sleep_ms)
                time.sleep(sleep_ms / 1000)
                acquired = self._try_acquire(cursor, lock_id)
                if not acquired and (time.monotonic() - started) * 1000 > \
                        self.config.acquire_timeout_ms:
                    raise StorageUnavailableError(
                        self.config.uri, f"lock {lock_id} not acquired in "
                                         f"{self.config.acquire_timeout_ms} ms")
            try:
                yield
            finally:
                cursor.execute(self._sql(f"DELETE FROM {LOCKS_TABLE} WHERE lock_id = ?"),
                               (lock_id,))
