"""The Storage contract, run against the local file system and a loopback S3 (moto)."""

from __future__ import annotations

import errno
import gc
import io
import os
import socket
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import BinaryIO, cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.s3_endpoint import S3Endpoint

from paimond.errors import (
    CorruptFileError,
    MissingFileError,
    StorageUnavailableError,
    UnsupportedError,
)
from paimond.format.types.data_types import BigIntType, DataField, RowType
from paimond.table.data_files import file_formats
from paimond.table.data_files.kv_layout import physical_arrow_schema
from paimond.table.options.core import TableOptions
from paimond.table.storage import fsspec_storage as storage_module
from paimond.table.storage import local_files
from paimond.table.storage.interface import Storage, open_storage


@dataclass(frozen=True)
class Backend:
    kind: str
    storage: Storage
    options: dict[str, str] = field(default_factory=dict)

    def reopen(self) -> Storage:
        """Another client on the same root, as another process would have."""
        return open_storage(self.storage.root, self.options)


@pytest.fixture(params=["local", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "local":
        return Backend("local", open_storage(str(tmp_path / "warehouse")))
    if request.param == "memory":  # one store per process: a fresh root per test
        return Backend("memory", open_storage(f"memory://{uuid.uuid4().hex}/warehouse"))
    endpoint = request.getfixturevalue("s3_endpoint")
    return Backend("s3", request.getfixturevalue("s3_storage"), endpoint.storage_options)


def _race(attempts: list[Callable[[], bool]]) -> list[bool]:
    """Run each attempt on its own thread, all released together."""
    barrier = threading.Barrier(len(attempts))
    results: list[bool | BaseException] = [False] * len(attempts)

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = attempts[i]()
        except BaseException as e:  # noqa: BLE001 - reported by the assert below
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(attempts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, bool) for r in results), results
    return [bool(r) for r in results]


def _payload(i: int) -> bytes:
    return f"writer-{i}|".encode() * 4096


def test_write_then_read(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes("db.db/t/schema/schema-0", "{\"id\": 0, \"名\": 1}".encode())
    assert s.read_bytes("db.db/t/schema/schema-0") == "{\"id\": 0, \"名\": 1}".encode()
    assert s.read_text(s.join("db.db", "t", "schema", "schema-0")) == "{\"id\": 0, \"名\": 1}"
    assert s.exists("db.db/t/schema/schema-0")
    assert s.size("db.db/t/schema/schema-0") == len("{\"id\": 0, \"名\": 1}".encode())
    s.write_bytes("db.db/t/schema/schema-0", b"shorter")
    assert s.read_bytes("db.db/t/schema/schema-0") == b"shorter"
    assert not s.exists("db.db/t/schema/schema-1")


def test_join_and_root_are_full_uris(backend: Backend) -> None:
    s = backend.storage
    assert not s.root.endswith("/")
    assert s.join("a", "b/", "/c") == f"{s.root}/a/b/c"
    assert s.join(f"{s.root}/x/", "y") == f"{s.root}/x/y"
    assert s.join() == s.root
    if backend.kind == "s3":
        assert s.root.startswith("s3://paimond-test-")


def test_missing_file_errors_name_the_full_uri(backend: Backend) -> None:
    s = backend.storage
    expected = s.join("t", "snapshot", "snapshot-3")
    for call in (s.read_bytes, s.read_text, s.open_input, s.size, s.mtime):
        with pytest.raises(MissingFileError) as info:
            call("t/snapshot/snapshot-3")
        assert info.value.path == expected
        assert str(info.value).startswith(expected)


def test_list_dir_gives_direct_children(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes("t/bucket-0/data-1.parquet", b"x" * 10)
    s.write_bytes("t/bucket-0/data-2.parquet", b"y" * 20)
    s.write_bytes("t/bucket-0/sub/deeper.parquet", b"z")
    children = s.list_dir("t/bucket-0")
    assert [(c.name, c.size_bytes, c.is_dir) for c in children] == [
        ("data-1.parquet", 10, False),
        ("data-2.parquet", 20, False),
        ("sub", 0, True),
    ]
    assert [c.path for c in children] == [s.join("t/bucket-0", c.name) for c in children]
    assert all(c.mtime_s is not None for c in children if not c.is_dir)
    assert s.list_dir(s.join("t")) == [c for c in s.list_dir("t") if c.name == "bucket-0"]


def test_list_dir_of_missing_dir_is_empty(backend: Backend) -> None:
    assert backend.storage.list_dir("no/such/dir") == []


def test_delete_reports_whether_the_file_existed(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes("t/a", b"1")
    assert s.delete("t/a") is True
    assert not s.exists("t/a")
    assert s.delete("t/a") is False


def test_delete_dir_if_empty(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes("t/part=1/f", b"1")
    assert s.delete_dir_if_empty("t/part=1") is False
    assert s.read_bytes("t/part=1/f") == b"1"
    assert s.delete_dir_if_empty("t/part=9") is False
    s.delete("t/part=1/f")
    # A local directory outlives its files; an S3 prefix vanishes with its last key.
    assert s.delete_dir_if_empty("t/part=1") is (backend.kind == "local")
    assert s.list_dir("t") == []


@pytest.mark.s3
def test_s3_directory_markers(s3_endpoint: S3Endpoint, s3_storage: Storage) -> None:
    """Tools such as Hadoop's S3A write ``dir/`` marker objects; they read as directories."""
    bucket = s3_storage.root.removeprefix("s3://")
    s3_endpoint.put_raw(bucket, "t/part=1/", b"")
    s3_storage.write_bytes("t/part=1/data-0.parquet", b"1")
    assert [(c.name, c.is_dir) for c in s3_storage.list_dir("t")] == [("part=1", True)]
    assert [c.name for c in s3_storage.list_dir("t/part=1")] == ["data-0.parquet"]
    assert s3_storage.delete_dir_if_empty("t/part=1") is False
    assert s3_storage.delete("t/part=1/data-0.parquet") is True
    assert [(c.name, c.is_dir) for c in s3_storage.list_dir("t")] == [("part=1", True)]
    assert s3_storage.delete_dir_if_empty("t/part=1") is True
    assert s3_storage.list_dir("t") == []


def test_mtime_is_recent_epoch_seconds(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes("t/f", b"1")
    mtime_s = s.mtime("t/f")
    assert mtime_s is not None
    assert abs(mtime_s - time.time()) < 300


def test_open_input_feeds_pyarrow(backend: Backend) -> None:
    s = backend.storage
    table = pa.table({"k": list(range(1000)), "v": [str(i) for i in range(1000)]})
    sink = io.BytesIO()
    pq.write_table(table, sink)
    s.write_bytes("t/bucket-0/data-0.parquet", sink.getvalue())
    for buffered in (True, False):
        with s.open_input("t/bucket-0/data-0.parquet", buffered=buffered) as f:
            assert pq.ParquetFile(f, buffer_size=4096).read().equals(table)
            f.seek(-4, os.SEEK_END)
            assert f.read(4) == b"PAR1"


def _names(s: Storage, path: str) -> list[str]:
    return [c.name for c in s.list_dir(path)]


def test_open_output_publishes_only_on_close(backend: Backend) -> None:
    s, other = backend.storage, backend.reopen()
    chunks = [bytes([i]) * (100_000 + i) for i in range(5)]
    out = s.open_output("t/bucket-0/data-0.parquet")
    for i, chunk in enumerate(chunks):
        assert out.write(chunk) == len(chunk)
        assert out.tell() == sum(map(len, chunks[: i + 1]))
        assert not other.exists("t/bucket-0/data-0.parquet")
    assert not out.closed
    out.close()
    assert out.closed
    assert other.read_bytes("t/bucket-0/data-0.parquet") == b"".join(chunks)
    assert _names(s, "t/bucket-0") == ["data-0.parquet"]  # no temp file left
    out.abort()  # after close: changes nothing
    out.close()
    assert s.read_bytes("t/bucket-0/data-0.parquet") == b"".join(chunks)


def test_open_output_abort_leaves_nothing(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes("t/bucket-0/kept", b"1")
    out = s.open_output("t/bucket-0/data-1.parquet")
    out.write(b"x" * 300_000)
    out.abort()
    out.close()  # after abort: publishes nothing
    assert not s.exists("t/bucket-0/data-1.parquet")
    with pytest.raises(RuntimeError, match="writer failed"), \
            s.open_output("t/bucket-0/data-2.parquet") as failing:
        failing.write(b"y" * 1000)
        raise RuntimeError("writer failed")
    assert failing.closed and not s.exists("t/bucket-0/data-2.parquet")
    abandoned = s.open_output("t/bucket-0/data-3.parquet")
    abandoned.write(b"z" * 1000)
    del abandoned  # dropped unfinished: discarded, never published half written
    gc.collect()
    assert _names(s, "t/bucket-0") == ["kept"]


def test_open_output_feeds_pyarrow_writers(backend: Backend) -> None:
    s = backend.storage
    table = pa.table({"k": list(range(5000)), "v": [str(i) for i in range(5000)]})
    with s.open_output("t/bucket-0/data-0.parquet") as out:
        with pq.ParquetWriter(out, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=1000):
                writer.write_batch(batch)
        size = out.tell()
    assert s.size("t/bucket-0/data-0.parquet") == size
    with s.open_input("t/bucket-0/data-0.parquet") as f:
        assert pq.read_table(f).equals(table)


@pytest.mark.s3
def test_s3_open_output_is_a_multipart_upload(s3_endpoint: S3Endpoint, s3_storage: Storage,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage_module, "_UPLOAD_PART_BYTES", 5 * 2**20)  # S3's minimum
    bucket = s3_storage.root.removeprefix("s3://")
    chunk = os.urandom(2**20)
    out = s3_storage.open_output("t/bucket-0/data-0.parquet")
    for _ in range(12):
        out.write(chunk)
    # Parts went out while writing; the object appears only when the upload completes.
    assert s3_endpoint.multipart_uploads(bucket) == ["t/bucket-0/data-0.parquet"]
    assert not s3_storage.exists("t/bucket-0/data-0.parquet")
    out.close()
    assert s3_endpoint.multipart_uploads(bucket) == []
    assert s3_storage.read_bytes("t/bucket-0/data-0.parquet") == chunk * 12
    aborted = s3_storage.open_output("t/bucket-0/data-1.parquet")
    for _ in range(12):
        aborted.write(chunk)
    assert s3_endpoint.multipart_uploads(bucket) == ["t/bucket-0/data-1.parquet"]
    aborted.abort()
    assert s3_endpoint.multipart_uploads(bucket) == []
    assert _names(s3_storage, "t/bucket-0") == ["data-0.parquet"]


def test_open_output_failed_publish_leaves_no_temp_file(tmp_path: Path) -> None:
    s = open_storage(str(tmp_path))
    (tmp_path / "t" / "data-0.parquet").mkdir(parents=True)  # the rename target is taken
    out = s.open_output("t/data-0.parquet")
    out.write(b"x" * 1000)
    with pytest.raises(IsADirectoryError):
        out.close()
    assert out.closed
    assert _names(s, "t") == ["data-0.parquet"] and _names(s, "t/data-0.parquet") == []


def test_read_text_rejects_invalid_utf8(backend: Backend) -> None:
    s = backend.storage
    s.write_bytes("t/snapshot/snapshot-1", b"\xff\xfe{")
    with pytest.raises(CorruptFileError) as info:
        s.read_text("t/snapshot/snapshot-1")
    assert info.value.path == s.join("t/snapshot/snapshot-1")


def test_create_exclusive_first_create_wins(backend: Backend) -> None:
    s = backend.storage
    assert s.create_exclusive("t/snapshot/snapshot-1", b"first") is True
    assert s.create_exclusive("t/snapshot/snapshot-1", b"second") is False
    assert s.read_bytes("t/snapshot/snapshot-1") == b"first"
    assert [c.name for c in s.list_dir("t/snapshot")] == ["snapshot-1"]  # no temp left


def test_created_file_is_seen_at_once_by_another_client(backend: Backend) -> None:
    s, other = backend.storage, backend.reopen()
    assert s.list_dir("t/snapshot") == [] and not s.exists("t/snapshot/snapshot-2")
    assert other.create_exclusive("t/snapshot/snapshot-2", b"2") is True
    assert s.exists("t/snapshot/snapshot-2")
    assert [c.name for c in s.list_dir("t/snapshot")] == ["snapshot-2"]
    assert s.create_exclusive("t/snapshot/snapshot-2", b"mine") is False


def test_create_exclusive_race_has_one_winner(backend: Backend) -> None:
    clients = [backend.reopen() for _ in range(12)]
    rounds = 20 if backend.kind == "local" else 3
    for round_ in range(rounds):
        path = f"t/snapshot/snapshot-{round_}"
        results = _race([partial(c.create_exclusive, path, _payload(i))
                         for i, c in enumerate(clients)])
        assert results.count(True) == 1
        assert backend.storage.read_bytes(path) == _payload(results.index(True))
    names = {c.name for c in backend.storage.list_dir("t/snapshot")}
    assert names == {f"snapshot-{r}" for r in range(rounds)}  # and no temp files


def test_create_exclusive_without_hard_links_stays_exclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: str, dst: str) -> None:
        raise PermissionError(errno.EPERM, "hard links not supported", dst)

    monkeypatch.setattr(os, "link", no_links)
    s = open_storage(str(tmp_path))
    assert s.create_exclusive("t/snapshot/snapshot-1", b"first") is True
    assert s.create_exclusive("t/snapshot/snapshot-1", b"second") is False
    assert s.read_bytes("t/snapshot/snapshot-1") == b"first"
    results = _race([partial(s.create_exclusive, "t/snapshot/snapshot-2", _payload(i))
                     for i in range(12)])
    assert results.count(True) == 1
    assert s.read_bytes("t/snapshot/snapshot-2") == _payload(results.index(True))
    assert [c.name for c in s.list_dir("t/snapshot")] == ["snapshot-1", "snapshot-2"]


_CHILD = """
import sys
from paimond.table.storage.interface import open_storage
storage = open_storage(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
print(storage.create_exclusive(sys.argv[2], sys.argv[3].encode() * 4096), flush=True)
"""


def test_create_exclusive_race_across_processes_locally(tmp_path: Path) -> None:
    root = str(tmp_path / "warehouse")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, root, "t/snapshot/snapshot-1", f"process-{i}|"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        for i in range(8)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    for child in children:  # all imported and waiting: release them together
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outputs = [child.communicate(timeout=60)[0].strip() for child in children]
    assert [child.returncode for child in children] == [0] * 8
    assert outputs.count("True") == 1 and outputs.count("False") == 7
    winner = outputs.index("True")
    storage = open_storage(root)
    assert storage.read_bytes("t/snapshot/snapshot-1") == f"process-{winner}|".encode() * 4096
    assert [c.name for c in storage.list_dir("t/snapshot")] == ["snapshot-1"]


def test_overwrite_is_never_seen_half_written(backend: Backend) -> None:
    s, reader = backend.storage, backend.reopen()
    old, new = b"a" * 2**20, b"b" * 2**21
    s.write_bytes("t/snapshot/LATEST", old)
    rounds = 30 if backend.kind == "local" else 8
    done = threading.Event()
    seen: list[bytes] = []

    def write() -> None:
        for i in range(rounds):
            s.write_bytes("t/snapshot/LATEST", new if i % 2 == 0 else old)
        done.set()

    writer = threading.Thread(target=write)
    writer.start()
    while not done.is_set() or not seen:
        seen.append(reader.read_bytes("t/snapshot/LATEST"))
    writer.join()
    assert {len(b) for b in seen} <= {len(old), len(new)}
    assert all(b in (old, new) for b in seen)
    assert [c.name for c in s.list_dir("t/snapshot")] == ["LATEST"]  # no temp left


@pytest.mark.parametrize("form", ["absolute", "file_uri", "relative"])
def test_local_root_forms_reach_the_same_files(
    form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    uri = {"absolute": str(tmp_path / "wh"), "file_uri": f"file://{tmp_path}/wh",
           "relative": "wh"}[form]
    s = open_storage(uri)
    s.write_bytes("t/f", b"1")
    assert (tmp_path / "wh" / "t" / "f").read_bytes() == b"1"
    assert s.root == (f"file://{tmp_path}/wh" if form == "file_uri" else str(tmp_path / "wh"))
    assert s.read_bytes(str(tmp_path / "wh" / "t" / "f")) == b"1"
    with pytest.raises(UnsupportedError):
        s.read_bytes("s3://bucket/t/f")


def test_local_paths_as_file_and_local_uris(tmp_path: Path) -> None:
    s = open_storage(str(tmp_path / "wh"))
    s.write_bytes("t/f", b"1")
    for uri in (f"file://{tmp_path}/wh/t/f", f"file:{tmp_path}/wh/t/f", f"local://{tmp_path}/wh/t/f"):
        assert s.read_bytes(uri) == b"1"
        assert s.size(uri) == 1
    assert [c.name for c in s.list_dir(f"file://{tmp_path}/wh/t/")] == ["f"]


def test_local_list_dir_keeps_a_dangling_link_and_skips_a_vanished_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = open_storage(str(tmp_path / "wh"))
    s.write_bytes("t/a", b"12")
    s.write_bytes("t/gone", b"1")
    os.symlink(tmp_path / "nothing", tmp_path / "wh" / "t" / "link")
    real_scandir = os.scandir

    def scandir_then_delete(path: str) -> object:  # "gone" is deleted once listed
        entries = real_scandir(path)
        os.remove(tmp_path / "wh" / "t" / "gone")
        return entries

    monkeypatch.setattr(local_files.os, "scandir", scandir_then_delete)
    listed = s.list_dir("t")
    assert [(c.name, c.size_bytes, c.is_dir) for c in listed] == [
        ("a", 2, False), ("link", len(str(tmp_path / "nothing")), False)]
    assert s.list_dir("t/a") == []  # a file has no children


def test_local_storage_does_not_import_fsspec(tmp_path: Path) -> None:
    probe = (
        "import sys; from paimond.table.storage.interface import open_storage\n"
        f"s = open_storage({str(tmp_path)!r}); s.write_bytes('t/f', b'1')\n"
        "assert [c.name for c in s.list_dir('t')] == ['f'] and s.size('t/f') == 1\n"
        "assert s.mtime('t/f') and s.delete('t/f') and s.delete_dir_if_empty('t')\n"
        "print('fsspec' in sys.modules)")
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)
    assert answer.stdout.strip() == "False"


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="no posix_fadvise here")
def test_a_local_data_file_goes_to_disk_row_group_by_row_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    advised: list[tuple[str, int]] = []
    real_fadvise = os.posix_fadvise

    def spy(fd: int, offset: int, length: int, advice: int) -> None:
        advised.append((os.readlink(f"/proc/self/fd/{fd}"), advice))
        real_fadvise(fd, offset, length, advice)

    monkeypatch.setattr(local_files.os, "posix_fadvise", spy)
    monkeypatch.setattr(file_formats, "_ROW_GROUP_BYTES", 4000)
    row_type = RowType(fields=(DataField(0, "id", BigIntType(nullable=False)),))
    s = open_storage(str(tmp_path))
    with s.open_output("t/data.parquet") as out:
        writer = file_formats.open_format_writer("parquet", cast(BinaryIO, out), row_type,
                                                 compression="zstd", options=TableOptions({}))
        schema = physical_arrow_schema(row_type)
        for start in range(0, 3000, 500):
            writer.write(pa.record_batch([pa.array(range(start, start + 500), pa.int64())],
                                         schema=schema))
        writer.finish()
    parquet = pq.ParquetFile(tmp_path / "t" / "data.parquet")
    assert parquet.read().column("id").to_pylist() == list(range(3000))
    groups = parquet.metadata.num_row_groups
    assert groups > 1
    # the temp file beside it was advised once per row group, before it was published
    assert len(advised) == groups
    assert all(os.path.basename(path).startswith(".data.parquet.") and
               advice == os.POSIX_FADV_DONTNEED for path, advice in advised)


def test_a_file_system_that_refuses_the_writeback_advice_still_gets_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(fd: int, offset: int, length: int, advice: int) -> None:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(local_files.os, "posix_fadvise", refuse, raising=False)
    s = open_storage(str(tmp_path))
    with s.open_output("t/f") as out:
        out.write(b"12")
        out.flush()
        out.write(b"3")
    assert s.read_bytes("t/f") == b"123"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_SECRET = "s3cr3t-never-shown-0123456789"
_KEY = "AKIAKEYNEVERSHOWN0000"


def test_unreachable_endpoint_is_unavailable_quickly() -> None:
    options = {
        "endpoint_url": f"http://127.0.0.1:{_closed_port()}", "key": _KEY, "secret": _SECRET,
        "region": "us-east-1", "connect_timeout_s": "1", "read_timeout_s": "1",
        "max_attempts": "1",
    }
    s = open_storage("s3://down-bucket/wh", options)
    assert _SECRET not in repr(s) and _KEY not in repr(s)
    calls: list[Callable[[], object]] = [
        lambda: s.read_bytes("t/snapshot/snapshot-3"), lambda: s.list_dir("t/snapshot"),
        lambda: s.create_exclusive("t/snapshot/snapshot-3", b"{}"),
        lambda: s.exists("t/snapshot/snapshot-3"),
    ]
    for call in calls:
        started = time.monotonic()
        with pytest.raises(StorageUnavailableError) as info:
            call()
        assert time.monotonic() - started < 5
        assert info.value.uri.startswith("s3://down-bucket/wh/t/snapshot")
        text = "".join(traceback.format_exception(info.value))
        assert _SECRET not in text and _KEY not in text


@pytest.mark.s3
def test_missing_credentials_are_unavailable(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    options = {"endpoint_url": s3_endpoint.endpoint_url, "max_attempts": "1"}
    with pytest.raises(StorageUnavailableError) as info:
        open_storage("s3://any-bucket", options).read_bytes("t/f")
    assert info.value.uri == "s3://any-bucket/t/f"
    assert "NoCredentialsError" in info.value.reason


@pytest.mark.s3
def test_endpoint_from_paimond_env(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = s3_endpoint.make_bucket("paimond-env-endpoint")
    monkeypatch.setenv("PAIMOND_S3_ENDPOINT_URL", s3_endpoint.endpoint_url)
    s = open_storage(bucket)  # credentials and region from the fixture's environment
    assert s.create_exclusive("t/f", b"via env") is True
    assert s.read_bytes(f"{bucket}/t/f") == b"via env"


@pytest.mark.s3
def test_secrets_stay_out_of_repr_and_errors(s3_endpoint: S3Endpoint) -> None:
    options = {**s3_endpoint.storage_options, "key": _KEY, "secret": _SECRET}
    s = open_storage(s3_endpoint.make_bucket("paimond-secrets"), options)
    s.write_bytes("t/f", b"ok")  # moto accepts any credentials
    assert s.read_bytes("t/f") == b"ok"
    with pytest.raises(MissingFileError) as info:
        s.read_bytes("t/g")
    for text in (repr(s), str(info.value), "".join(traceback.format_exception(info.value))):
        assert _SECRET not in text and _KEY not in text
