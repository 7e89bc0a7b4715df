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
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for
from support.s3_endpoint import S3Endpoint

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.errors import ConfigError, StorageUnavailableError, UnsupportedError
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import list_tables, open_table
from paimond.table.catalogs.catalog_storage import CatalogStorage, with_catalog
from paimond.table.catalogs.data_token import DataToken, TokenStorage, token_storage_options
from paimond.table.layout import partition_text
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import Storage, open_storage

TOKEN = "secret-token"
CLOCK = Clock(fixed_ms=1_700_000_000_000)


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
    defaults: dict[str, str] = field(default_factory=dict)  # more of /v1/config's defaults
    # where the tables are (file:<warehouse> unless set), and how a commit writes a snapshot
    tables_uri: str | None = None
    write_snapshot: Callable[[str, str], bool] | None = None
    # data tokens: "db.t" -> the token's options, and the tables asked for, in order
    tokens: dict[str, dict[str, str]] = field(default_factory=dict)
    token_expires_ms: int = 0
    token_requests: list[str] = field(default_factory=list)

    def answer(self, method: str, path: str, query: dict[str, list[str]],
               body: Any) -> tuple[int, Any]:
        if self.fail_with is not None:
            return self.fail_with, {"message": "the server is unwell", "code": self.fail_with}
        if path == "/v1/config":
            assert query.get("warehouse") == ["wh"]
            return 200, {"defaults": {"prefix": "cat", **self.defaults}, "overrides": {}}
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
        if len(parts) == 5 and parts[4] == "token" and method == "GET":
            self.token_requests.append(f"{parts[1]}.{parts[3]}")
            return 200, {"token": self.tokens[f"{parts[1]}.{parts[3]}"],
                         "expiresAtMillis": self.token_expires_ms}
        if len(parts) == 5 and parts[4] == "commit" and method == "POST":
            return 200, {"success": self._commit(parts[1], parts[3], body)}
        return 404, {"message": f"no {path}", "code": 404}

    def _detail(self, name: str) -> dict[str, Any]:
        database, table = name.split(".")
        root = self.tables_uri or f"file:{self.warehouse}"
        return {"id": self.tables[name], "name": table, "isExternal": False,
                "path": f"{root}/{database}.db/{table}"}

    def _commit(self, database: str, table: str, body: Any) -> bool:
        self.commits.append(body)
        if body["tableId"] != self.tables[f"{database}.{table}"]:
            return False
        if self.refuse_next_commits:
            self.refuse_next_commits -= 1
            return False
        snapshot = body["snapshot"]
        if self.write_snapshot is not None:
            root = f"{self.tables_uri}/{database}.db/{table}"
            return self.write_snapshot(f"{root}/snapshot/snapshot-{snapshot['id']}",
                                       json.dumps(snapshot))
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


# -- data tokens ---------------------------------------------------------------------------

def _upload(s3: S3Endpoint, local: Path, bucket: str, prefix: str) -> None:
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        s3.put_raw(bucket, f"{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())


def test_a_tables_files_go_through_its_data_token_in_the_driver_and_the_workers(
        server: FakeServer, s3_endpoint: S3Endpoint) -> None:
    """The warehouse's own options name an S3 endpoint that answers nothing; the server's data
    token names the live one. Listing, compaction in worker processes and the commit through
    the server all reach the table, so each of them used the token."""
    _partitioned_table(server, "db.t", 4)
    bucket = s3_endpoint.make_bucket(f"paimond-token-{uuid.uuid4().hex[:12]}")[len("s3://"):]
    _upload(s3_endpoint, server.warehouse / "db.db" / "t", bucket, "wh/db.db/t")
    live = open_storage(f"s3://{bucket}", s3_endpoint.storage_options)
    server.tables_uri = f"s3a://{bucket}/wh"  # as Java names it; paimond reads it as s3://
    server.write_snapshot = lambda path, text: live.create_exclusive(
        path.replace("s3a://", "s3://"), text.encode())
    server.defaults = {"data-token.enabled": "true"}
    server.tokens["db.t"] = {"fs.s3a.access-key": "token-key", "fs.s3a.secret-key": "token-secret",
                             "fs.s3a.endpoint": s3_endpoint.endpoint_url,
                             "fs.s3a.endpoint.region": s3_endpoint.region}
    server.token_expires_ms = CLOCK.wall_ms() + 4 * 3_600_000
    dead = {"endpoint_url": "http://127.0.0.1:9", "region": s3_endpoint.region,
            "max_attempts": "1", "connect_timeout_s": "1"}
    storage = with_catalog(open_storage(f"s3://{bucket}/wh", dead), _options(server),
                           secret=TOKEN, clock=CLOCK)
    with pytest.raises(StorageUnavailableError):
        storage.list_dir(f"s3://{bucket}/wh/db.db/t")  # the warehouse's own options reach nothing

    (table,) = list_tables(storage, storage.root)
    assert table.path == f"s3://{bucket}/wh/db.db/t"
    assert table.location.vended and table.location.options["key"] == "token-key"
    assert "token-secret" not in repr(table.location)
    before = read_rows(str(server.warehouse), "db.t")
    summary = CompactJob(table, clock=CLOCK, full=True, use_processes=True).run()
    assert len(summary.results) == 4 and not summary.failures  # 2 partitions x 2 buckets

    assert [c["snapshot"]["id"] for c in server.commits] == [5]
    latest = open_table(storage, storage.root, "db.t").snapshots.latest()
    assert latest is not None and (latest.id, latest.commit_kind) == (5, "COMPACT")
    assert server.token_requests == ["db.t"]  # one token while it is fresh
    local = server.warehouse / "db.db" / "t"
    _download(live, f"s3://{bucket}/wh/db.db/t", local)
    assert (local / "snapshot" / "snapshot-5").exists()
    assert read_rows(str(server.warehouse), "db.t").equals(before)


def _download(storage: Storage, uri: str, local: Path) -> None:
    """Every file under ``uri`` into ``local`` (the same relative paths)."""
    for status in storage.list_dir(uri):
        target = local / status.name
        if status.is_dir:
            target.mkdir(parents=True, exist_ok=True)
            _download(storage, status.path, target)
        else:
            target.write_bytes(storage.read_bytes(status.path))


class _Clock:
    def __init__(self, ms: int) -> None:
        self.ms = ms

    def wall_ms(self) -> int:
        return self.ms


def test_a_token_is_renewed_within_the_hour_before_it_expires() -> None:
    clock = _Clock(10_000_000)
    handed: list[DataToken] = []

    def fetch() -> DataToken:
        number = len(handed)
        handed.append(DataToken({"fs.s3a.access.key": f"id-{number}",
                                 "fs.s3a.secret.key": f"secret-{number}",
                                 "fs.s3a.session.token": f"sts-{number}"},
                                clock.ms + 2 * 3_600_000))
        return handed[-1]

    storage = TokenStorage("db.t", "s3://bucket/wh/db.db/t", {"region": "eu-west-1"}, fetch,
                           clock)  # type: ignore[arg-type]
    first = storage.location
    assert first.vended and first.root == "s3://bucket/wh/db.db/t"
    assert dict(first.options) == {"region": "eu-west-1", "key": "id-0", "secret": "secret-0",
                                   "token": "sts-0"}
    clock.ms += 3_600_000 - 1  # still more than an hour left
    assert storage.location.options["key"] == "id-0" and len(handed) == 1
    clock.ms += 2  # within the hour: a new token
    assert storage.location.options["key"] == "id-1" and len(handed) == 2
    # a vended location keeps its credentials on the way to a Spark executor
    assert storage.location.without_options({"key", "secret", "token"}) == storage.location


def test_an_oss_token_gives_ossfs_its_credentials_and_endpoint() -> None:
    token = DataToken({"fs.oss.accessKeyId": "id", "fs.oss.accessKeySecret": "secret",
                       "fs.oss.securityToken": "sts", "fs.oss.endpoint": "oss-cn-hangzhou.aliyuncs.com",
                       "fs.oss.region": "cn-hangzhou"}, 0)
    assert token_storage_options("db.t", "oss://bucket/wh/db.db/t", token) == {
        "key": "id", "secret": "secret", "token": "sts", "endpoint": "oss-cn-hangzhou.aliyuncs.com"}


@pytest.mark.parametrize(("uri", "token", "message"), [
    ("s3://b/t", {"fs.s3a.access-key": "KEY-1"}, "no s3:// access key and secret"),
    # Paimon's own test server hands out these when told nothing else
    ("s3://b/t", {"akId": "KEY-1", "akSecret": "SECRET-1"}, "its keys: akId, akSecret"),
    ("oss://b/t", {"fs.s3a.access-key": "KEY-1", "fs.s3a.secret-key": "SECRET-1"},
     "no oss:// access key and secret"),
    ("gs://b/t", {"gcs.access-token": "TOKEN-1"}, "on s3:// and oss:// only"),
])
def test_a_token_paimond_cannot_use_is_refused_without_its_values(
        uri: str, token: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        token_storage_options("db.t", uri, DataToken(token, 0))
    assert raised.value.key == "catalog data-token.enabled"
    assert not any(v in str(raised.value) for v in token.values())


@pytest.mark.parametrize("token", [
    {"s3.access-key": "k", "s3.secret-key": "s", "s3.session-token": "t"},
    {"fs.s3a.access.key": "k", "fs.s3a.secret.key": "s", "fs.s3a.session.token": "t"},
    {"fs.s3.accessKeyId": "k", "fs.s3.accessKeySecret": "s", "fs.s3.securityToken": "t"},
])
def test_every_spelling_of_an_s3_token_means_the_same(token: dict[str, str]) -> None:
    assert token_storage_options("db.t", "s3a://b/t", DataToken(token, 0)) == \
        {"key": "k", "secret": "s", "token": "t"}


def test_the_server_and_the_client_say_whether_tokens_are_used(server: FakeServer) -> None:
    _partitioned_table(server, "db.t", 1)
    warehouse = str(server.warehouse)
    server.defaults = {"data-token.enabled": "true"}
    off = with_catalog(open_storage(warehouse), {**_options(server), "data-token.enabled": "false"},
                       secret=TOKEN)
    (table,) = list_tables(off, warehouse)
    assert table.storage is off and not server.token_requests  # the client's option wins
    on = with_catalog(open_storage(warehouse), _options(server), secret=TOKEN)
    with pytest.raises(ConfigError, match="on s3:// and oss:// only"):
        _ = list_tables(on, warehouse)[0].location  # a local table: no token to use
    with pytest.raises(ConfigError, match="true or false") as raised:
        with_catalog(open_storage(warehouse), {**_options(server), "data-token.enabled": "yes"},
                     secret=TOKEN)
    assert raised.value.key == "catalog data-token.enabled"
