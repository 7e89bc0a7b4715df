"""The REST catalog client against a small REST server written here from Paimon's REST
catalog spec (paged listings, a bearer token, commits the server applies itself): the tables
are the server's; each snapshot commit is a POST with the table's id, the base snapshot's
uuid and per-partition statistics that equal the change of the live files' totals; a commit
the server answers ``success: false`` is retried; credentials and bad options are refused
with the key named; an unreachable or failing server is a StorageUnavailableError; a snapshot
file is never written around the server. (Paimon's own server and Java's client:
tests/interop/test_java_rest_catalog.py.)"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_tables import catalog_for

from paimond.cli.main import main
from paimond.errors import ConfigError, StorageUnavailableError, UnsupportedError
from paimond.table.catalog import list_tables, open_table
from paimond.table.catalogs.catalog_storage import CatalogStorage, with_catalog
from paimond.table.layout import partition_text
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage

TOKEN = "secret-token"


@dataclass
class FakeServer:
    """Paimon's REST catalog API, the parts paimond uses: tables of a local warehouse, listed
    one per page; commits applied by writing the snapshot file, as Paimon's server does."""

    warehouse: Path
    tables: dict[str, str] = field(default_factory=dict)  # "db.t" -> id
    commits: list[dict[str, Any]] = field(default_factory=list)
    refuse_next_commits: int = 0
    fail_with: int | None = None
    url: str = ""

    def answer(self, method: str, path: str, query: dict[str, list[str]],
               body: Any) -> tuple[int, Any]:
        if self.fail_with is not None:
            return self.fail_with, {"message": "the server is unwell", "code": self.fail_with}
        if path == "/v1/config":
            assert query.get("warehouse") == ["wh"]
            return 200, {"defaults": {"prefix": "cat"}, "overrides": {}}
        parts = path.removeprefix("/v1/cat/").split("/")
        page = int(query.get("pageToken", ["0"])[0])
        if parts == ["databases"]:
            databases = sorted({name.split(".")[0] for name in self.tables})
            return 200, _page("databases", databases, page)
        if len(parts) == 3 and parts[2] == "table-details":
            details = [self._detail(name) for name in sorted(self.tables)
                       if name.startswith(parts[1] + ".")]
            return 200, _page("tableDetails", details, page)
        if len(parts) == 4 and f"{parts[1]}.{parts[3]}" in self.tables and method == "GET":
            return 200, self._detail(f"{parts[1]}.{parts[3]}")
        if len(parts) == 5 and parts[4] == "commit" and method == "POST":
            return 200, {"success": self._commit(parts[1], parts[3], body)}
        return 404, {"message": f"no {path}", "code": 404}

    def _detail(self, name: str) -> dict[str, Any]:
        database, table = name.split(".")
        return {"id": self.tables[name], "name": table, "isExternal": False,
                "path": f"file:{self.warehouse}/{database}.db/{table}"}

    def _commit(self, database: str, table: str, body: Any) -> bool:
        self.commits.append(body)
        if body["tableId"] != self.tables[f"{database}.{table}"]:
            return False
        if self.refuse_next_commits:
            self.refuse_next_commits -= 1
            return False
        snapshot = body["snapshot"]
        path = self.warehouse / f"{database}.db" / table / "snapshot" / f"snapshot-{snapshot['id']}"
        if path.exists():
            return False
        path.write_text(json.dumps(snapshot))
        return True


def _page(key: str, items: list[Any], page: int) -> dict[str, Any]:
    """One item a page, the next page's token until the last."""
    answer: dict[str, Any] = {key: items[page:page + 1]}
    if page + 1 < len(items):
        answer["nextPageToken"] = str(page + 1)
    return answer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeServer]:
    fake = FakeServer(tmp_path / "wh")
    fake.warehouse.mkdir()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self, method: str) -> None:
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                status, answer = 401, {"message": "not authorized", "code": 401}
            else:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                split = urlsplit(self.path)
                status, answer = fake.answer(method, split.path, parse_qs(split.query), body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self._serve("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._serve("POST")

        def log_message(self, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        http.shutdown()
        http.server_close()


def _options(server: FakeServer) -> dict[str, str]:
    return {"metastore": "rest", "uri": server.url, "warehouse": "wh", "token.provider": "bear"}


def _partitioned_table(server: FakeServer, name: str, commits: int) -> None:
    """A write-only primary-key table partitioned by ``dt`` (two partitions, 2 buckets),
    ``commits`` pypaimon commits, registered with the server."""
    schema = pa.schema([("dt", pa.string()), pa.field("id", pa.int64(), nullable=False),
                        ("v", pa.string())])
    catalog = catalog_for(str(server.warehouse))
    catalog.create_database(name.split(".")[0], True)
    catalog.create_table(name, Schema.from_pyarrow_schema(
        schema, partition_keys=["dt"], primary_keys=["dt", "id"],
        options={"bucket": "2", "write-only": "true"}), False)
    table = catalog.get_table(name)
    for i in range(commits):
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.table({"dt": ["2024-01-01", "2024-01-02", "2024-01-01"],
                                    "id": [i, i, i + 1], "v": ["a", "b", "c"]}, schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
    server.tables[name] = f"id-of-{name}"


def _totals(storage: CatalogStorage, warehouse: str, name: str) -> dict[str, tuple[int, ...]]:
    """Per partition (``dt``): live rows, files and bytes, summed over the latest snapshot."""
    table = open_table(storage, warehouse, name)
    latest = table.snapshots.latest()
    assert latest is not None
    totals: dict[str, list[int]] = {}
    schema = table.latest_schema()
    for live in scan_snapshot(table, latest).files:
        dt = partition_text(schema, live.entry.partition).split("=", 1)[1]
        sums = totals.setdefault(dt, [0, 0, 0])
        sums[0] += live.meta.row_count
        sums[1] += 1
        sums[2] += live.meta.file_size
    return {dt: tuple(sums) for dt, sums in totals.items()}


def test_a_commit_goes_through_the_server_with_its_statistics(server: FakeServer) -> None:
    _partitioned_table(server, "db.t", 4)
    _partitioned_table(server, "db.u", 1)
    _partitioned_table(server, "other.w", 1)
    warehouse = str(server.warehouse)
    storage = with_catalog(open_storage(warehouse), _options(server), secret=TOKEN)
    assert isinstance(storage, CatalogStorage)
    # every page of databases and of tables
    assert [t.name for t in list_tables(storage, warehouse)] == ["db.t", "db.u", "other.w"]
    before = _totals(storage, warehouse, "db.t")
    server.refuse_next_commits = 1  # the first attempt loses: paimond tries again
    flags = [f"--catalog-option={k}={v}" for k, v in _options(server).items()]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PAIMOND_REST_TOKEN", TOKEN)
        assert main(["compact", warehouse, "--table", "db.t", "--full", *flags]) == 0
    after = _totals(storage, warehouse, "db.t")

    # the refused attempt and its retry, both on snapshot 4
    assert [c["snapshot"]["id"] for c in server.commits] == [5, 5]
    assert server.commits[0]["statistics"] == server.commits[1]["statistics"]
    request = server.commits[-1]
    base = json.loads((server.warehouse / "db.db" / "t" / "snapshot" / "snapshot-4").read_text())
    assert (request["tableId"], request["baseSnapshotUuid"]) == ("id-of-db.t", base["uuid"])
    committed = json.loads((server.warehouse / "db.db" / "t" / "snapshot"
                            / "snapshot-5").read_text())
    assert committed == request["snapshot"] and committed["commitKind"] == "COMPACT"
    statistics = {s["spec"]["dt"]: s for s in request["statistics"]}
    assert set(statistics) == {"2024-01-01", "2024-01-02"}
    for dt, stats in statistics.items():
        change = tuple(a - b for a, b in zip(after[dt], before[dt], strict=True))
        assert (stats["recordCount"], stats["fileCount"], stats["fileSizeInBytes"]) == change
        assert stats["totalBuckets"] == 2 and stats["lastFileCreationTime"] > 0


def test_a_snapshot_file_is_never_written_around_the_server(server: FakeServer) -> None:
    _partitioned_table(server, "db.t", 1)
    warehouse = str(server.warehouse)
    storage = with_catalog(open_storage(warehouse), _options(server), secret=TOKEN)
    assert isinstance(storage, CatalogStorage)
    snapshot_dir = server.warehouse / "db.db" / "t" / "snapshot"
    with pytest.raises(UnsupportedError, match="committed through its server"):
        storage.write_bytes(str(snapshot_dir / "snapshot-2"), b"{}")
    stray = server.warehouse / "db.db" / "stray" / "snapshot" / "snapshot-1"
    with pytest.raises(ConfigError, match="no table of the REST catalog"):
        storage.create_exclusive(str(stray), b"{}")
    assert not (snapshot_dir / "snapshot-2").exists() and not stray.exists()
    # any other file is the storage's own
    hint = snapshot_dir / "LATEST"
    storage.write_bytes(str(hint), b"1")
    assert hint.read_bytes() == b"1"


@pytest.mark.parametrize(("options", "secret", "key"), [
    ({"token": "t"}, None, "catalog token"),
    ({"token.provider": "dlf"}, TOKEN, "catalog token.provider"),
    ({}, None, "catalog token.provider"),
    ({"uri": "thrift://host:9083"}, TOKEN, "catalog uri"),
    ({"lock.enabled": "true"}, TOKEN, "catalog"),
])
def test_bad_options_are_refused_naming_the_key(server: FakeServer, options: dict[str, str],
                                                secret: str | None, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        with_catalog(open_storage(str(server.warehouse)), {**_options(server), **options},
                     secret=secret)
    assert raised.value.key == key


def test_a_refused_token_or_a_failing_server_is_named(server: FakeServer) -> None:
    warehouse = str(server.warehouse)
    refused = with_catalog(open_storage(warehouse), _options(server), secret="wrong")
    assert isinstance(refused, CatalogStorage)
    with pytest.raises(ConfigError, match="HTTP 401") as raised:
        list_tables(refused, warehouse)
    assert raised.value.key == "catalog token" and "wrong" not in str(raised.value)
    server.fail_with = 503
    failing = with_catalog(open_storage(warehouse), _options(server), secret=TOKEN)
    with pytest.raises(StorageUnavailableError, match="HTTP 503.*unwell"):
        list_tables(failing, warehouse)
    gone = with_catalog(open_storage(warehouse),
                        {**_options(server), "uri": "http://127.0.0.1:9"}, secret=TOKEN)
    with pytest.raises(StorageUnavailableError, match="127.0.0.1:9"):
        list_tables(gone, warehouse)
