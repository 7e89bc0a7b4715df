"""A REST catalog served by Paimon's own ``RESTCatalogServer`` (paimon-core 2.0.0's test jar),
Java Paimon 2.0 writing through Paimon's ``RESTCatalog``: paimond lists the server's tables,
compacts one committing through the server (the server writes the snapshot and adds the
commit's partition statistics to its own), the server then answers paimond's snapshot as the
table's latest, Java writes on through the server and reads the model's rows; the daemon
maintains the catalog's tables from a config file; rollback is refused."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from support.java_maintainer import JavaMaintainer
from support.java_reader import JavaReaders
from support.rest_catalog import PREFIX, TOKEN, RestServer

from paimond.cli.main import main
from paimond.errors import RefusedError
from paimond.maintenance.rollback import RollbackTarget, plan_rollback
from paimond.table.catalog import list_tables, open_table
from paimond.table.catalogs.catalog_storage import CatalogStorage, with_catalog
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage


def _server_statistics(server: RestServer, table: str) -> dict[str, Any]:
    """The server's own statistics of ``table`` (``GET .../snapshot``: the sums of every
    commit's partition statistics)."""
    database, name = table.split(".")
    request = urllib.request.Request(
        f"{server.url.rstrip('/')}/v1/{PREFIX}/databases/{database}/tables/{name}/snapshot",
        headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read())["snapshot"])


def _write_batches(java: JavaMaintainer, server: RestServer, table: str,
                   model: dict[int, str], batches: int) -> None:
    for batch in range(batches):
        rows = [["+I", i, f"{table}{batch}"] for i in range(batch, batch + 5)]
        model.update((i, v) for _, i, v in rows)
        assert java.catalog_write(server.java_options(), table, rows) == batch + 1


def test_paimond_commits_through_the_rest_server(java_maintainer: JavaMaintainer,
                                                  java_readers: JavaReaders,
                                                  rest_catalog: RestServer,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: Any) -> None:
    server, model = rest_catalog, {}
    _write_batches(java_maintainer, server, "db.t", model, 4)
    java_maintainer.catalog_write(server.java_options(), "db.u", [["+I", 1, "x"]])

    warehouse = str(server.warehouse)
    storage = with_catalog(open_storage(warehouse), server.options(), secret=TOKEN)
    assert isinstance(storage, CatalogStorage)
    assert [t.name for t in list_tables(storage, warehouse)] == ["db.t", "db.u"]
    monkeypatch.setenv("PAIMOND_REST_TOKEN", TOKEN)
    flags = [f"--catalog-option={k}={v}" for k, v in server.options().items()]
    assert main(["compact", warehouse, "--table", "db.t", "--full", *flags]) == 0
    assert "snapshot 5" in capsys.readouterr().out

    # the server took the commit: it answers paimond's snapshot as the latest, and its
    # statistics of the table add up to the files now live
    assert java_maintainer.catalog_latest(server.java_options(), "db.t") == 5
    table = open_table(storage, warehouse, "db.t")
    latest = table.snapshots.latest()
    assert latest is not None and (latest.id, latest.commit_kind) == (5, "COMPACT")
    live = [f.meta for f in scan_snapshot(table, latest).files]
    statistics = _server_statistics(server, "db.t")
    assert statistics["snapshot"]["id"] == 5
    assert (statistics["recordCount"], statistics["fileCount"],
            statistics["fileSizeInBytes"]) == (sum(f.row_count for f in live), len(live),
                                               sum(f.file_size for f in live))

    # Java writes on through the server and reads the model's rows
    assert java_maintainer.catalog_write(server.java_options(), "db.t", [["+I", 0, "last"]]) == 6
    model[0] = "last"
    expected = sorted(f'[{i},"{v}"]' for i, v in model.items())
    for reader in java_readers.every():
        assert sorted(reader.read_rows(server.warehouse / "db.db" / "t")) == expected, \
            reader.release

    # history rewritten file by file would bypass the server: refused before any write
    with pytest.raises(RefusedError, match="REST catalog"):
        plan_rollback(table, RollbackTarget("snapshot", snapshot_id=4))


def test_the_daemon_maintains_the_rest_catalogs_tables(java_maintainer: JavaMaintainer,
                                                        rest_catalog: RestServer,
                                                        tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    server = rest_catalog
    for table in ("db.a", "db.b"):
        _write_batches(java_maintainer, server, table, {}, 6)
    catalog = ", ".join(f'"{k}" = "{v}"' for k, v in server.options().items())
    config = tmp_path / "paimond.toml"
    config.write_text(f'[[warehouses]]\nuri = "{server.warehouse}"\ncatalog = {{ {catalog} }}\n'
                      '[jobs.compact]\nfull = true\n')
    monkeypatch.setenv("PAIMOND_REST_TOKEN", TOKEN)
    assert main(["run-once", "--config", str(config)]) == 0
    storage = with_catalog(open_storage(str(server.warehouse)), server.options(), secret=TOKEN)
    for name in ("db.a", "db.b"):
        latest = open_table(storage, str(server.warehouse), name).snapshots.latest()
        assert latest is not None and latest.commit_kind == "COMPACT", name
        assert java_maintainer.catalog_latest(server.java_options(), name) == latest.id
