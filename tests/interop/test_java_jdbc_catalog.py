"""A JDBC catalog Java Paimon 2.0 makes and writes through (SQLite, ``lock.enabled``): paimond
finds the tables Java registered, compacts them committing under the lock row Java's
``JdbcCatalogLock`` uses, and Java writes on and reads the model's rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from support.java_maintainer import JavaMaintainer
from support.java_reader import JavaReaders

from paimond.cli.main import main
from paimond.table.catalog import list_tables, open_table
from paimond.table.catalogs.catalog_storage import CatalogStorage, with_catalog
from paimond.table.storage.interface import open_storage


def test_paimond_maintains_the_tables_java_registered(java_maintainer: JavaMaintainer,
                                                       java_readers: JavaReaders,
                                                       tmp_path: Path, capsys: Any) -> None:
    warehouse, catalog = tmp_path / "wh", tmp_path / "catalog.db"
    warehouse.mkdir()
    uri = f"jdbc:sqlite:{catalog}"
    model: dict[int, str] = {}
    for batch in range(4):
        rows = [["+I", i, f"v{batch}"] for i in range(batch, batch + 5)]
        model.update((i, v) for _, i, v in rows)
        assert java_maintainer.jdbc_write(uri, warehouse, "db.t", rows) == batch + 1
    java_maintainer.jdbc_write(uri, warehouse, "db.u", [["+I", 1, "x"]])
    with sqlite3.connect(catalog) as connection:  # Java's own rows and lock table
        registered = connection.execute("SELECT catalog_key, database_name, table_name "
                                        "FROM paimon_tables ORDER BY table_name").fetchall()
        assert connection.execute("SELECT count(*) FROM paimon_distributed_locks").fetchone() == (0,)
    assert registered == [("jdbc", "db", "t"), ("jdbc", "db", "u")]

    options = {"metastore": "jdbc", "uri": uri, "lock.enabled": "true"}
    storage = with_catalog(open_storage(str(warehouse)), options)
    assert isinstance(storage, CatalogStorage) and storage.locked
    assert [t.name for t in list_tables(storage, str(warehouse))] == ["db.t", "db.u"]
    flags = [f"--catalog-option={k}={v}" for k, v in options.items()]
    assert main(["compact", str(warehouse), "--table", "db.t", "--full", *flags]) == 0
    assert "snapshot 5" in capsys.readouterr().out
    table = open_table(storage, str(warehouse), "db.t")
    latest = table.snapshots.latest()
    assert latest is not None and (latest.id, latest.commit_kind) == (5, "COMPACT")

    # Java writes on under the same lock, and reads the model's rows
    assert java_maintainer.jdbc_write(uri, warehouse, "db.t", [["+I", 0, "last"]]) == 6
    model[0] = "last"
    expected = sorted(f'[{i},"{v}"]' for i, v in model.items())
    for reader in java_readers.every():
        assert sorted(reader.read_rows(warehouse / "db.db" / "t")) == expected, reader.release
