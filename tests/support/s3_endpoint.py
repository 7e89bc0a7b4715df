"""A real S3 endpoint on loopback: moto's server, in this process, on a free port.

``s3_endpoint`` (session) starts it once; ``s3_storage`` (function) opens a ``Storage`` rooted at
a fresh bucket. Nothing here contacts anything but 127.0.0.1. Without moto the tests skip,
except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

import pytest

from paimond.table.storage.interface import Storage, open_storage

REGION = "us-east-1"
ACCESS_KEY = "paimond-test-key"
SECRET_KEY = "paimond-test-secret"
_START_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class S3Endpoint:
    endpoint_url: str
    region: str
    _fs: Any = field(repr=False)

    @property
    def storage_options(self) -> dict[str, str]:
        """Options for ``open_storage``; a fresh dict each time."""
        return {
            "endpoint_url": self.endpoint_url,
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "region": self.region,
        }

    def make_bucket(self, name: str) -> str:
        self._fs.call_s3("create_bucket", Bucket=name)  # us-east-1: no LocationConstraint
        return f"s3://{name}"

    def multipart_uploads(self, bucket: str) -> list[str]:
        """Keys of the multipart uploads begun and neither completed nor aborted."""
        answer = self._fs.call_s3("list_multipart_uploads", Bucket=bucket)
        return sorted(u["Key"] for u in answer.get("Uploads", []))

    def take_away(self, bucket: str) -> Any:
        """The bucket, objects and all, out of the endpoint's store in one step: requests meet
        ``NoSuchBucket`` and the name is free, as after the bucket was emptied and deleted,
        until :meth:`put_back` returns it exactly as it was (same objects, same metadata)."""
        from moto.s3.models import s3_backends

        for account in list(s3_backends):
            for backend in s3_backends[account].values():
                if bucket in backend.buckets:
                    s3_backends.bucket_accounts.pop(bucket, None)
                    return backend, backend.buckets.pop(bucket)
        raise FileNotFoundError(bucket)

    def put_back(self, taken: Any) -> None:
        from moto.s3.models import s3_backends

        backend, fake = taken
        backend.buckets[fake.name] = fake
        s3_backends.bucket_accounts[fake.name] = (backend.partition, backend.account_id)

    def put_raw(self, bucket: str, key: str, data: bytes) -> None:
        """Put a key as other tools write it, e.g. a ``dir/`` marker a Storage never writes."""
        self._fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data)


def _missing_service(reason: str) -> NoReturn:
    message = f"loopback S3 endpoint unavailable: {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _fake_aws_env(mp: pytest.MonkeyPatch) -> None:
    """Fake credentials and a fixed region; no profile, config file or metadata service."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "PAIMOND_S3_ENDPOINT_URL"):
        mp.delenv(name, raising=False)
    mp.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    mp.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    mp.setenv("AWS_DEFAULT_REGION", REGION)
    mp.setenv("AWS_REGION", REGION)
    mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
    mp.setenv("AWS_CONFIG_FILE", os.devnull)
    mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


def _serialise_conditional_puts(mp: pytest.MonkeyPatch) -> None:
    """moto 5.2.5 checks If-None-Match and then stores the object in two steps
    (moto/s3/responses.py ``put_object``), so two racing PUTs could both pass the check.
    AWS S3 makes the conditional PUT atomic; one lock around moto's handler does the same,
    so the race tests check paimond and not a moto window."""
    from moto.s3.responses import S3Response

    original = S3Response.put_object
    lock = threading.Lock()

    def put_object(self: Any, *args: Any, **kwargs: Any) -> Any:
        with lock:
            return original(self, *args, **kwargs)

    mp.setattr(S3Response, "put_object", put_object)


def _list_moto_modules_once(mp: pytest.MonkeyPatch) -> None:
    """moto's server finds the service of every request by first asking whether the host names
    one of its modules, which lists moto's package directory (about 200 stat calls) each time,
    under the dispatcher's lock. The directory does not change while the tests run: list it
    once."""
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    mp.setattr(backends, "list_of_moto_modules", lambda: modules)


def _start_server() -> Any:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    # start() waits forever if binding fails inside its thread, so wait for it here.
    starter = threading.Thread(target=server.start, daemon=True)
    starter.start()
    starter.join(_START_TIMEOUT_S)
    if starter.is_alive():
        raise RuntimeError(f"moto server did not start within {_START_TIMEOUT_S} s")
    return server


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    with pytest.MonkeyPatch.context() as mp:
        _fake_aws_env(mp)
        try:
            import s3fs

            _list_moto_modules_once(mp)
            server = _start_server()
            _serialise_conditional_puts(mp)
        except Exception as e:  # noqa: BLE001 - any failure to start means "no service"
            _missing_service(f"{type(e).__name__}: {e}")
        werkzeug_log = logging.getLogger("werkzeug")
        old_level = werkzeug_log.level
        werkzeug_log.setLevel(logging.ERROR)  # moto logs every request at INFO
        try:
            host, port = server.get_host_and_port()
            endpoint_url = f"http://{host}:{port}"
            fs = s3fs.S3FileSystem(
                endpoint_url=endpoint_url, key=ACCESS_KEY, secret=SECRET_KEY,
                client_kwargs={"region_name": REGION}, skip_instance_cache=True,
            )
            yield S3Endpoint(endpoint_url=endpoint_url, region=REGION, _fs=fs)
        finally:
            server.stop()
            werkzeug_log.setLevel(old_level)


@pytest.fixture
def s3_storage(s3_endpoint: S3Endpoint) -> Storage:
    bucket = s3_endpoint.make_bucket(f"paimond-test-{uuid.uuid4().hex[:16]}")
    return open_storage(bucket, s3_endpoint.storage_options)
