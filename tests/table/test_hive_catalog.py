"""The Hive catalog without a JVM: the Thrift binary protocol's bytes as the Thrift spec lays
them out, and :class:`HiveCatalog` against a metastore played by a socket server in the test
(which tables are Paimon's and where they live, the lock's WAITING/ACQUIRED dance and its
timeout, partition drops ignoring a missing partition, options refused by key). The real
metastore and Java's HiveCatalog: tests/interop/test_java_hive_catalog.py."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from paimond.errors import CodecError, ConfigError, StorageUnavailableError
from paimond.table.catalogs.catalog_storage import CatalogStorage, with_catalog
from paimond.table.catalogs.hive import (
    INPUT_FORMAT,
    OUTPUT_FORMAT,
    HiveCatalog,
    HiveCatalogConfig,
)
from paimond.table.catalogs.thrift_codec import (
    I32,
    I64,
    LIST,
    MAP,
    STRING,
    STRUCT,
    Field,
    ThriftApplicationError,
    encode_call,
    read_reply,
    write_struct,
)
from paimond.table.storage.interface import open_storage


def _reader(data: bytes) -> Callable[[int], bytes]:
    position = [0]

    def read(size: int) -> bytes:
        chunk = data[position[0]:position[0] + size]
        if len(chunk) != size:
            raise EOFError
        position[0] += size
        return chunk

    return read


def test_a_call_is_laid_out_as_the_strict_binary_protocol() -> None:
    # version 1 | CALL, name, sequence id; field (type 11, id 1, "db"); STOP
    expected = (b"\x80\x01\x00\x01" + b"\x00\x00\x00\x0eget_all_tables" + b"\x00\x00\x00\x07"
                + b"\x0b\x00\x01" + b"\x00\x00\x00\x02db" + b"\x00")
    assert encode_call("get_all_tables", 7, [Field(1, STRING, "db")]) == expected
    nested = encode_call("m", 1, [Field(1, STRUCT, (Field(1, LIST, (STRING, ["a"])),
                                                    Field(2, MAP, (STRING, I32, {"k": 5}))))])
    assert nested.endswith(b"\x0c\x00\x01" + b"\x0f\x00\x01\x0b\x00\x00\x00\x01\x00\x00\x00\x01a"
                           + b"\x0d\x00\x02\x0b\x08\x00\x00\x00\x01\x00\x00\x00\x01k"
                           + b"\x00\x00\x00\x05" + b"\x00" + b"\x00")


def _answer(kind: int, method: str, sequence: int, fields: list[Field]) -> bytes:
    out = bytearray(struct.pack(">I", 0x80010000 | kind))
    out += struct.pack(">i", len(method)) + method.encode() + struct.pack(">i", sequence)
    write_struct(out, fields)
    return bytes(out)


def test_a_reply_is_read_generically_and_errors_are_named() -> None:
    reply = _answer(2, "get_table", 3, [Field(0, STRUCT, (
        Field(1, STRING, "t"), Field(7, STRUCT, (Field(2, STRING, "file:/wh/t"),)),
        Field(9, MAP, (STRING, STRING, {"a": "b"})), Field(99, I64, 1 << 40)))])
    assert read_reply(_reader(reply), "get_table", 3) == {
        0: {1: "t", 7: {2: "file:/wh/t"}, 9: {"a": "b"}, 99: 1 << 40}}
    failed = _answer(3, "get_table", 3, [Field(1, STRING, "Invalid method name"),
                                         Field(2, I32, 1)])
    with pytest.raises(ThriftApplicationError, match="Invalid method name"):
        read_reply(_reader(failed), "get_table", 3)
    with pytest.raises(CodecError, match="expected get_table#4"):
        read_reply(_reader(reply), "get_table", 4)
    with pytest.raises(CodecError, match="not a strict binary protocol"):
        read_reply(_reader(b"\x00\x00\x00\x01" + reply[4:]), "get_table", 3)


def _table(name: str, location: str, *, paimon: bool = True,
           parameters: dict[str, str] | None = None) -> tuple[Field, ...]:
    formats = (INPUT_FORMAT, OUTPUT_FORMAT) if paimon else ("TextInputFormat", "TextOutput")
    return (Field(1, STRING, name), Field(2, STRING, "db"),
            Field(7, STRUCT, (Field(2, STRING, location), Field(3, STRING, formats[0]),
                              Field(4, STRING, formats[1]))),
            Field(9, MAP, (STRING, STRING, parameters or {})))


class FakeMetastore(socketserver.ThreadingTCPServer):
    """Answers the calls HiveCatalog makes from ``tables`` and a lock that says WAITING
    ``waits`` times before ACQUIRED; records every call."""

    daemon_threads = allow_reuse_address = True

    def __init__(self, warehouse: Path) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.calls: list[tuple[str, dict[int, Any]]] = []
        self.waits = 0
        self.partitions = {("2020-01-01",)}
        self.tables = [_table("a", f"file:{warehouse}/db.db/a"),
                       _table("b", f"file:{warehouse}/elsewhere/b",
                              parameters={"paimon_location": f"file:{warehouse}/moved/b"}),
                       _table("hive_text", f"file:{warehouse}/db.db/h", paimon=False)]

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.server_address[1]}"

    def answer(self, method: str, arguments: dict[int, Any]) -> list[Field]:
        self.calls.append((method, arguments))
        if method == "get_all_databases":
            return [Field(0, LIST, (STRING, ["db"]))]
        if method == "get_all_tables":
            return [Field(0, LIST, (STRING, ["hive_text", "b", "a"]))]
        if method == "get_table_objects_by_name":
            wanted = set(arguments[2])
            return [Field(0, LIST, (STRUCT, [t for t in self.tables if t[0].value in wanted]))]
        if method in ("lock", "check_lock"):
            state = 2 if self.waits > 0 else 1
            self.waits -= 1
            return [Field(0, STRUCT, (Field(1, I64, 41), Field(2, I32, state)))]
        if method == "unlock":
            return []
        if method == "drop_partition":
            values = tuple(arguments[3])
            if values not in self.partitions:
                return [Field(1, STRUCT, (Field(1, STRING, f"partition values={list(values)}"),))]
            self.partitions.discard(values)
            return [Field(0, 2, True)]
        raise AssertionError(method)


class _Handler(socketserver.StreamRequestHandler):
    server: FakeMetastore

    def handle(self) -> None:
        while True:
            header = self.rfile.read(4)
            if len(header) < 4:
                return
            (size,) = struct.unpack(">i", self.rfile.read(4))
            method = self.rfile.read(size).decode()
            (sequence,) = struct.unpack(">i", self.rfile.read(4))
            arguments = _struct_reader(self.rfile.read)
            fields = self.server.answer(method, arguments)
            self.wfile.write(_answer(2, method, sequence, fields))


def _struct_reader(read: Callable[[int], bytes]) -> dict[int, Any]:
    """The arguments struct, read with the codec's own reader (the bytes it writes are checked
    against the spec above)."""
    from paimond.table.catalogs.thrift_codec import _Reader

    return _Reader(read).struct()


@pytest.fixture
def metastore(tmp_path: Path) -> Iterator[FakeMetastore]:
    server = FakeMetastore(tmp_path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_the_metastores_paimon_tables_and_their_locations(metastore: FakeMetastore,
                                                          tmp_path: Path) -> None:
    options = {"metastore": "hive", "uri": metastore.uri}
    storage = with_catalog(open_storage(str(tmp_path)), options)
    assert isinstance(storage, CatalogStorage) and not storage.locked  # local: Java's default
    assert storage.tables(str(tmp_path)) == [("db.a", f"{tmp_path}/db.db/a"),
                                             ("db.b", f"{tmp_path}/elsewhere/b")]
    moved = with_catalog(open_storage(str(tmp_path)),
                         {**options, "location-in-properties": "true", "lock.enabled": "true"})
    assert isinstance(moved, CatalogStorage) and moved.locked
    assert dict(moved.tables(str(tmp_path)))["db.b"] == f"{tmp_path}/moved/b"
    batch = [args for method, args in metastore.calls if method == "get_table_objects_by_name"]
    assert batch and sorted(batch[0][2]) == ["a", "b", "hive_text"]


def test_the_lock_waits_then_holds_and_is_released(metastore: FakeMetastore) -> None:
    catalog = HiveCatalog(HiveCatalogConfig.of({"uri": metastore.uri,
                                                "lock-check-max-sleep": "200 ms"}))
    metastore.waits = 2
    with catalog.lock("db", "t$branch_b"):
        methods = [m for m, _ in metastore.calls]
        assert methods == ["lock", "check_lock", "check_lock"]
    lock_request = metastore.calls[0][1][1]
    component = lock_request[1][0]
    assert (component[1], component[2], component[3], component[4]) == (3, 2, "db", "t$branch_b")
    assert 6 not in component  # no operation type, as Java unsets it
    assert metastore.calls[-1] == ("unlock", {1: {1: 41}})


def test_a_lock_not_acquired_in_time_is_released_and_named(metastore: FakeMetastore) -> None:
    catalog = HiveCatalog(HiveCatalogConfig.of({"uri": metastore.uri,
                                                "lock-acquire-timeout": "300 ms",
                                                "lock-check-max-sleep": "100 ms"}))
    metastore.waits = 1000
    with pytest.raises(StorageUnavailableError, match=r"db\.t \(lockId=41\).*WAITING"):
        with catalog.lock("db", "t"):
            raise AssertionError("never held")
    assert metastore.calls[-1][0] == "unlock"


def test_partitions_are_dropped_keeping_data_and_a_missing_one_is_skipped(
        metastore: FakeMetastore) -> None:
    catalog = HiveCatalog(HiveCatalogConfig.of({"uri": metastore.uri}))
    assert catalog.drop_partitions("db", "t", [["2020-01-01"], ["2020-01-01.done"]]) == 1
    drops = [args for method, args in metastore.calls if method == "drop_partition"]
    assert [(d[1], d[2], d[3], d[4]) for d in drops] == [
        ("db", "t", ["2020-01-01"], False), ("db", "t", ["2020-01-01.done"], False)]


@pytest.mark.parametrize(("options", "key"), [
    ({"uri": "thrift://h:9083", "hive.metastore.sasl.enabled": "true"}, "catalog"),
    ({"uri": "http://h:9083"}, "catalog uri"),
    ({"uri": "thrift://h"}, "catalog uri"),
    ({}, "catalog uri"),
    ({"uri": "thrift://h:9083", "lock.enabled": "yes"}, "lock.enabled"),
    ({"uri": "thrift://h:9083", "lock-acquire-timeout": "soon"}, "lock-acquire-timeout"),
    ({"hive-conf-dir": "/nonexistent"}, "hive-conf-dir"),
])
def test_bad_options_are_refused_naming_the_key(options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        HiveCatalogConfig.of(options)
    assert raised.value.key == key


def test_hive_site_gives_the_uris_and_sasl_is_refused(tmp_path: Path) -> None:
    def site(properties: dict[str, str]) -> str:
        (tmp_path / "hive-site.xml").write_text("<configuration>" + "".join(
            f"<property><name>{k}</name><value>{v}</value></property>"
            for k, v in properties.items()) + "</configuration>")
        return str(tmp_path)

    config = HiveCatalogConfig.of({"hive-conf-dir": site(
        {"hive.metastore.uris": "thrift://a:9083, thrift://b:9084"})})
    assert config.uris == (("a", 9083), ("b", 9084))
    with pytest.raises(ConfigError, match="SASL") as raised:
        HiveCatalogConfig.of({"hive-conf-dir": site({"hive.metastore.uris": "thrift://a:1",
                                                     "hive.metastore.sasl.enabled": "true"})})
    assert raised.value.key == "hive-conf-dir"


def test_an_unreachable_metastore_is_named(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    catalog = HiveCatalog(HiveCatalogConfig.of({"uri": f"thrift://127.0.0.1:{port}"}))
    with pytest.raises(StorageUnavailableError, match=f"127.0.0.1:{port}"):
        catalog.tables()
