"""A warehouse registered in a Paimon JDBC catalog (SQLite, and a real PostgreSQL server):
paimond lists the catalog's tables, not the warehouse's directories; with ``lock.enabled`` its
snapshot commits run under the catalog's lock, the row Java's ``JdbcCatalogLock`` takes
(``<catalog-key>.<database>.<table>``, ``$branch_<b>`` for a branch), waiting while another
writer holds it and giving up (nothing committed) after the acquire timeout. The catalog tables
are made here with Java's own DDL (``JdbcUtils``), as a Java catalog leaves them."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from support.pk_table_writes import write_pk_table
from support.postgres import PASSWORD, Postgres

from paimond.cli.main import main
from paimond.config.settings import load_settings
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.errors import ConfigError, StorageUnavailableError
from paimond.maintenance.jobs import ROUTINE
from paimond.table.catalog import list_tables, open_table
from paimond.table.catalogs.catalog_storage import CatalogStorage, with_catalog
from paimond.table.storage.fsspec_storage import FsspecStorage
from paimond.table.storage.interface import open_storage

# Java's JdbcUtils.CREATE_CATALOG_TABLE and SqlLite/PostgresqlDistributedLockDialect's table
CATALOG_DDL = ("CREATE TABLE paimon_tables(catalog_key VARCHAR(255) NOT NULL,"
               "database_name VARCHAR(255) NOT NULL,table_name VARCHAR(255) NOT NULL,"
               "PRIMARY KEY (catalog_key, database_name, table_name))")
LOCKS_DDL = ("CREATE TABLE paimon_distributed_locks(lock_id VARCHAR(255) NOT NULL,"
             "acquired_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,"
             "expire_time_seconds BIGINT DEFAULT 0 NOT NULL,PRIMARY KEY (lock_id))")


class Database:
    """The catalog's database, reached as a Java catalog would (plain SQL)."""

    def __init__(self, uri: str, connect: Callable[[], Any], placeholder: str) -> None:
        self.uri, self._connect, self._placeholder = uri, connect, placeholder

    def run(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        connection = self._connect()
        try:
            cursor = connection.cursor()
            cursor.execute(sql.replace("?", self._placeholder), params)
            rows = list(cursor.fetchall()) if cursor.description else []
            connection.commit()
            return rows
        finally:
            connection.close()

    def register(self, catalog_key: str, name: str) -> None:
        database, table = name.split(".")
        self.run("INSERT INTO paimon_tables VALUES (?,?,?)", catalog_key, database, table)

    def locks(self) -> list[str]:
        return [row[0] for row in self.run("SELECT lock_id FROM paimon_distributed_locks")]


def _sqlite(tmp_path: Path) -> Database:
    path = tmp_path / "catalog.db"
    return Database(f"jdbc:sqlite:{path}", lambda: sqlite3.connect(path), "?")


def _postgres(server: Postgres) -> Database:
    import pg8000.dbapi

    def connect() -> Any:
        return pg8000.dbapi.connect(user="postgres", password=PASSWORD, host="127.0.0.1",
                                    port=server.port, database="postgres")

    database = Database(server.uri(), connect, "%s")
    database.run("DROP TABLE IF EXISTS paimon_tables")
    database.run("DROP TABLE IF EXISTS paimon_distributed_locks")
    return database


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_db(request: pytest.FixtureRequest, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Database]:
    if request.param == "sqlite":
        database = _sqlite(tmp_path)
    else:
        database = _postgres(request.getfixturevalue("postgres"))
        monkeypatch.setenv("PAIMOND_JDBC_PASSWORD", PASSWORD)
    database.run(CATALOG_DDL)
    yield database


def _warehouse(tmp_path: Path, database: Database) -> str:
    """db.t and db.u written by pypaimon; only db.t is registered (catalog key ``jdbc``), and
    db.v of another catalog key."""
    wh = str(tmp_path / "wh")
    write_pk_table(wh, 3, "db.t")
    write_pk_table(wh, 2, "db.u")
    database.register("jdbc", "db.t")
    database.register("other", "db.v")
    return wh


def _options(database: Database, **extra: str) -> dict[str, str]:
    return {"metastore": "jdbc", "uri": database.uri, **extra}


def test_the_catalogs_tables_are_listed_and_maintained(
        catalog_db: Database, tmp_path: Path, capsys: Any) -> None:
    wh = _warehouse(tmp_path, catalog_db)
    storage = with_catalog(open_storage(wh), _options(catalog_db), secret=None
                           if catalog_db.uri.startswith("jdbc:sqlite") else PASSWORD)
    assert isinstance(storage, CatalogStorage) and not storage.locked  # a local warehouse
    assert [t.name for t in list_tables(storage, wh)] == ["db.t"]

    argv = ["--catalog-option", "metastore=jdbc", "--catalog-option", f"uri={catalog_db.uri}"]
    assert main(["status", wh, *argv]) == 0
    out = capsys.readouterr().out
    assert "db.t" in out and "db.u" not in out

    config = tmp_path / "paimond.toml"
    config.write_text(f'[[warehouses]]\nuri = "{wh}"\n'
                      f'catalog = {{ metastore = "jdbc", uri = "{catalog_db.uri}" }}\n'
                      '[jobs.compact]\nfull = true\n')
    settings = load_settings(str(config), env={"PAIMOND_JDBC_PASSWORD": PASSWORD}, jobs=ROUTINE)
    runs = Daemon(settings, Metrics(CollectorRegistry())).run_once()
    assert [r.table for r in runs] == ["db.t"] and runs[0].error is None


def test_commits_run_under_the_catalogs_lock(catalog_db: Database, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    wh = _warehouse(tmp_path, catalog_db)
    catalog_db.run(LOCKS_DDL)
    storage = with_catalog(open_storage(wh), _options(catalog_db, **{
        "lock.enabled": "true", "catalog-key": "jdbc"}), secret=PASSWORD)
    assert isinstance(storage, CatalogStorage) and storage.locked
    held: list[list[str]] = []
    create = FsspecStorage.create_exclusive

    def noting(self: FsspecStorage, path: str, data: bytes) -> bool:
        if "/snapshot/snapshot-" in path:
            held.append(catalog_db.locks())  # the rows while the snapshot file is created
        return create(self, path, data)

    monkeypatch.setattr(FsspecStorage, "create_exclusive", noting)
    table = open_table(storage, wh, "db.t")
    assert main_compact(table, full=True) == 4
    assert held == [["jdbc.db.t"]]
    assert catalog_db.locks() == []  # released

    # a writer holding the lock: paimond waits for it, then commits
    write_pk_table(wh, 1, "db.t")  # snapshot 5, for the compaction to commit 6
    catalog_db.run("INSERT INTO paimon_distributed_locks (lock_id,expire_time_seconds) "
                   "VALUES (?,?)", "jdbc.db.t", 600)
    started = threading.Event()
    done: list[int] = []

    def compact() -> None:
        started.set()
        done.append(main_compact(table, full=True))

    worker = threading.Thread(target=compact)
    worker.start()
    started.wait()
    worker.join(timeout=1.0)
    assert not done, "committed while another writer held the lock"
    catalog_db.run("DELETE FROM paimon_distributed_locks WHERE lock_id = ?", "jdbc.db.t")
    worker.join(timeout=60)
    assert done == [6]


def test_a_lock_held_past_the_timeout_commits_nothing(catalog_db: Database,
                                                      tmp_path: Path) -> None:
    wh = _warehouse(tmp_path, catalog_db)
    catalog_db.run(LOCKS_DDL)
    catalog_db.run("INSERT INTO paimon_distributed_locks (lock_id,expire_time_seconds) "
                   "VALUES (?,?)", "jdbc.db.t", 600)
    storage = with_catalog(open_storage(wh), _options(catalog_db, **{
        "lock.enabled": "true", "lock-acquire-timeout": "1 s", "lock-check-max-sleep": "200 ms"}),
        secret=PASSWORD)
    table = open_table(storage, wh, "db.t")
    before = table.snapshots.latest_id()
    with pytest.raises(StorageUnavailableError, match="lock jdbc.db.t not acquired"):
        main_compact(table, full=True)
    assert table.snapshots.latest_id() == before
    # an expired lock (older than its expire_time_seconds) is taken over, as Java does
    catalog_db.run("UPDATE paimon_distributed_locks SET expire_time_seconds = ?", -1)
    assert main_compact(table, full=True) == before + 1


def main_compact(table: Any, *, full: bool = False) -> int:
    """One compaction of ``table``; its latest snapshot id after it."""
    from paimond.clock import SYSTEM_CLOCK
    from paimond.maintenance.compact.job import CompactJob

    CompactJob(table, clock=SYSTEM_CLOCK, full=full, use_processes=False).run()
    latest = table.snapshots.latest_id()
    assert latest is not None
    return int(latest)


def test_bad_catalog_options_are_config_errors(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path))
    for options, reason in (
            ({"metastore": "hive"}, "thrift://host:port"),
            ({"metastore": "glue"}, "reads filesystem, hive, jdbc, rest"),
            ({"metastore": "jdbc", "uri": "jdbc:mysql://x/y"}, "jdbc:sqlite"),
            ({"metastore": "jdbc", "uri": "jdbc:sqlite:/x", "colour": "red"}, "colour"),
            ({"metastore": "jdbc", "uri": "jdbc:sqlite:/x", "jdbc.password": "p"},
             "PAIMOND_JDBC_PASSWORD"),
            ({"metastore": "jdbc", "uri": "jdbc:sqlite:/x", "lock-acquire-timeout": "soon"},
             "not a duration")):
        with pytest.raises(ConfigError, match=reason):
            with_catalog(storage, options)
    missing = with_catalog(storage, {"metastore": "jdbc",
                                     "uri": f"jdbc:sqlite:{tmp_path / 'empty.db'}"})
    with pytest.raises(ConfigError, match="not a Paimon JDBC catalog"):
        list_tables(missing, str(tmp_path))
