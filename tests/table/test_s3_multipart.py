"""Large outputs go up to S3 by multipart upload, on moto's server on
loopback behind the request log: the parts are sent while writing, the object appears only
with CompleteMultipartUpload, and a write that fails leaves neither an object nor a pending
upload (the upload is aborted). A small output is one PUT."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support.s3_requests import CountingEndpoint, isolated_counting_endpoint, kinds

import paimond.table.storage.fsspec_storage as storage_module
from paimond.table.storage.interface import Storage, open_storage

pytestmark = pytest.mark.s3
_PART = 5 * 2**20  # S3's smallest part


@pytest.fixture(scope="module")
def endpoint() -> Iterator[CountingEndpoint]:
    with isolated_counting_endpoint() as started:
        yield started


@pytest.fixture
def storage(endpoint: CountingEndpoint, monkeypatch: pytest.MonkeyPatch,
            request: pytest.FixtureRequest) -> Storage:
    monkeypatch.setattr(storage_module, "_UPLOAD_PART_BYTES", _PART)
    bucket = "mpu-" + request.node.name.replace("_", "-")[:40].lower().strip("-")
    return open_storage(endpoint.make_bucket(bucket), endpoint.storage_options)


def _pending(endpoint: CountingEndpoint, storage: Storage) -> list[str]:
    answer = endpoint.fs.call_s3("list_multipart_uploads",
                                 Bucket=storage.root.removeprefix("s3://"))
    return [u["Key"] for u in answer.get("Uploads", [])]


def test_a_large_output_goes_up_in_parts_and_reads_back_alike(
        endpoint: CountingEndpoint, storage: Storage) -> None:
    data = os.urandom(3 * _PART + 2**20 + 12345)  # 4 parts, the last one short
    with endpoint.log.counting() as sent:
        out = storage.open_output("t/bucket-0/data-0.parquet")
        for start in range(0, len(data), 999_983):  # writes that do not align with parts
            out.write(data[start:start + 999_983])
        assert kinds(sent)["MPU-PART"] >= 2, "full parts go up while writing"
        assert not storage.is_file("t/bucket-0/data-0.parquet"), "invisible until complete"
        out.close()
        sent_parts = list(sent)
    counted = kinds([r for r in sent_parts if r.kind != "HEAD"])  # is_file's
    assert counted["MPU-CREATE"] == counted["MPU-COMPLETE"] == 1
    assert 3 <= counted["MPU-PART"] <= 4 and set(counted) == {"MPU-CREATE", "MPU-PART",
                                                             "MPU-COMPLETE"}
    assert storage.read_bytes("t/bucket-0/data-0.parquet") == data
    assert storage.size("t/bucket-0/data-0.parquet") == len(data) == out.tell()
    assert _pending(endpoint, storage) == []


def test_an_exception_while_writing_leaves_no_object_and_no_upload(
        endpoint: CountingEndpoint, storage: Storage) -> None:
    with endpoint.log.counting() as sent, pytest.raises(RuntimeError, match="writer failed"):
        with storage.open_output("t/bucket-0/data-1.parquet") as out:
            out.write(os.urandom(2 * _PART + 1000))
            assert _pending(endpoint, storage) == ["t/bucket-0/data-1.parquet"]
            raise RuntimeError("writer failed")
    assert kinds(sent)["MPU-ABORT"] == 1 and kinds(sent)["MPU-COMPLETE"] == 0
    assert _pending(endpoint, storage) == []
    assert storage.list_dir("t/bucket-0") == []
    assert not storage.is_file("t/bucket-0/data-1.parquet")


def test_a_small_output_is_one_put(endpoint: CountingEndpoint, storage: Storage) -> None:
    data = os.urandom(_PART - 1)
    with endpoint.log.counting() as sent:
        with storage.open_output("t/bucket-0/data-2.parquet") as out:
            out.write(data)
    assert kinds(sent) == {"PUT": 1}
    assert storage.read_bytes("t/bucket-0/data-2.parquet") == data
