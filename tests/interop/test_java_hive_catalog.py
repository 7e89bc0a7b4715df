"""A real Hive metastore (Apache Hive's standalone metastore 3.1.3, Derby-backed, on 127.0.0.1)
with Java Paimon 2.0 writing through Paimon's ``HiveCatalog`` under its lock: the daemon finds
the metastore's Paimon tables, compacts them and drops expired partitions from the metastore
(Java's own metastore listing no longer has them; Java reads the rest); a lock the metastore
holds for a table holds back Java's commit and paimond's alike (the same lock identity), and
the two writers racing under it lose no snapshot."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from support.hive_metastore import HiveMetastore
from support.java_maintainer import JavaMaintainer

from paimond.cli.main import main
from paimond.table.catalog import Table, list_tables, open_table
from paimond.table.catalogs.catalog_storage import with_catalog
from paimond.table.catalogs.hive import HiveCatalog, HiveCatalogConfig
from paimond.table.storage.interface import open_storage

PARTITIONED = {"metastore.partitioned-table": "true", "partition.expiration-time": "1 d",
               "partition.timestamp-formatter": "yyyy-MM-dd"}


def _database(tmp_path: Path) -> str:
    """A database name of this test's own (the metastore is shared by the session)."""
    return "h" + "".join(c for c in tmp_path.name.lower() if c.isalnum())[-20:]


def test_the_daemon_maintains_the_metastores_tables(hive_metastore: HiveMetastore,
                                                    hive_java_maintainer: JavaMaintainer,
                                                    tmp_path: Path) -> None:
    java, db = hive_java_maintainer, _database(tmp_path)
    warehouse = tmp_path / "wh"
    options = hive_metastore.options(warehouse, **{"lock.enabled": "true"})
    for batch in range(4):
        java.catalog_write(options, f"{db}.events", [["+I", i, f"v{batch}"]
                                                     for i in range(batch, batch + 5)])
    java.catalog_create_partitioned(options, f"{db}.daily", PARTITIONED)
    java.catalog_write(options, f"{db}.daily", [["+I", "2020-01-01", 1, "a"],
                                                ["+I", "2020-01-02", 2, "b"],
                                                ["+I", "2999-12-31", 3, "c"]])
    assert java.catalog_metastore_partitions(options, f"{db}.daily") == 3

    storage = with_catalog(open_storage(str(warehouse)), options)
    assert [t.name for t in list_tables(storage, str(warehouse))
            if t.name.startswith(db)] == [f"{db}.daily", f"{db}.events"]

    catalog = ", ".join(f'"{k}" = "{v}"' for k, v in options.items())
    config = tmp_path / "paimond.toml"
    config.write_text(f'[[warehouses]]\nuri = "{warehouse}"\ncatalog = {{ {catalog} }}\n'
                      f'[tables]\ninclude = ["{db}.*"]\n[jobs.compact]\nfull = true\n')
    assert main(["run-once", "--config", str(config)]) == 0

    events = open_table(storage, str(warehouse), f"{db}.events").snapshots.latest()
    assert events is not None and events.commit_kind == "COMPACT"
    assert java.catalog_latest(options, f"{db}.events") == events.id
    assert java.catalog_count(options, f"{db}.events") == 8

    # the two old partitions left the table and, before that, the metastore, as Java drops them
    daily = open_table(storage, str(warehouse), f"{db}.daily").snapshots.latest()
    assert daily is not None and daily.commit_kind == "OVERWRITE"
    assert java.catalog_metastore_partitions(options, f"{db}.daily", "2020-01-01") == 0
    assert java.catalog_metastore_partitions(options, f"{db}.daily", "2020-01-02") == 0
    assert java.catalog_metastore_partitions(options, f"{db}.daily", "2999-12-31") == 1
    assert java.catalog_count(options, f"{db}.daily") == 1


def _held_back(commit: threading.Thread, table: Table, latest: int) -> None:
    """``commit`` started while the metastore's lock is held: after 3 s its snapshot is not
    there yet (read from storage: the Java maintainer answers one request at a time)."""
    commit.start()
    time.sleep(3)
    assert commit.is_alive()
    assert table.snapshots.latest_id() == latest


def test_the_metastores_lock_holds_back_java_and_paimond_alike(
        hive_metastore: HiveMetastore, hive_java_maintainer: JavaMaintainer,
        tmp_path: Path) -> None:
    java, db = hive_java_maintainer, _database(tmp_path)
    warehouse = tmp_path / "wh"
    options = hive_metastore.options(warehouse, **{"lock.enabled": "true"})
    name = f"{db}.t"
    for batch in range(3):
        java.catalog_write(options, name, [["+I", batch, "x"]])
    table = open_table(with_catalog(open_storage(str(warehouse)), options), str(warehouse), name)
    metastore = HiveCatalog(HiveCatalogConfig.of(options))
    results: list[int] = []
    with metastore.lock(db, "t"):  # what a third writer holding the table's lock looks like
        writer = threading.Thread(daemon=True, target=lambda: results.append(
            java.catalog_write(options, name, [["+I", 10, "java"]])))
        _held_back(writer, table, 3)
    writer.join(timeout=120)
    assert results == [4]

    flags = [f"--catalog-option={k}={v}" for k, v in options.items()]
    with metastore.lock(db, "t"):
        compaction = threading.Thread(daemon=True, target=lambda: results.append(
            main(["compact", str(warehouse), "--table", name, "--full", *flags])))
        _held_back(compaction, table, 4)
    compaction.join(timeout=120)
    assert results == [4, 0]
    compacted = table.snapshots.latest()
    assert compacted is not None and (compacted.id, compacted.commit_kind) == (5, "COMPACT")


def test_java_and_paimond_race_under_the_metastores_lock(
        hive_metastore: HiveMetastore, hive_java_maintainer: JavaMaintainer,
        tmp_path: Path) -> None:
    java, db = hive_java_maintainer, _database(tmp_path)
    warehouse = tmp_path / "wh"
    options = hive_metastore.options(warehouse, **{"lock.enabled": "true"})
    name, rounds = f"{db}.race", 10
    java.catalog_write(options, name, [["+I", 0, "seed"]])
    flags = [f"--catalog-option={k}={v}" for k, v in options.items()]
    compactions: list[int] = []
    for round_number in range(1, rounds + 1):
        writer = threading.Thread(daemon=True, target=java.catalog_write,
                                  args=(options, name, [["+I", round_number, "java"]]))
        writer.start()
        compactions.append(main(["compact", str(warehouse), "--table", name, "--full",
                                 *flags]))
        writer.join(timeout=120)
    assert compactions == [0] * rounds
    table = open_table(with_catalog(open_storage(str(warehouse)), options), str(warehouse), name)
    snapshots = [table.snapshots.load(i) for i in table.snapshots.list_ids()]
    assert [s.id for s in snapshots] == list(range(1, len(snapshots) + 1))  # none overwritten
    kinds = [s.commit_kind for s in snapshots]
    assert kinds.count("APPEND") == rounds + 1
    assert java.catalog_count(options, name) == rounds + 1
