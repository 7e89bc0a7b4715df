"""A loopback S3 endpoint that logs every request: moto's server behind a WSGI wrapper.

Counts are what paimond asks of an object store: deterministic, unlike
times, so tests may assert them. ``counting_endpoint`` starts one server on 127.0.0.1:0;
``RequestLog.counting()`` collects the requests of one block of code, as ``(method, key,
query)`` where ``key`` is the object key or prefix without the bucket. Used by
tests/table/test_s3_requests*.py and bench/s3_requests.py. It needs no oracle (the tables
the counts run on are written in tests/support/pk_table_writes.py).
"""

from __future__ import annotations

import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_KEY, _SECRET, _REGION = "paimond-test-key", "paimond-test-secret", "us-east-1"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    key: str  # the object key (or, for a LIST, the prefix asked for), bucket left out
    query: str

    @property
    def kind(self) -> str:
        """GET, PUT, HEAD, DELETE, LIST (GET of a bucket), BATCH-DELETE (POST ?delete), and
        a multipart upload's MPU-CREATE, MPU-PART, MPU-COMPLETE, MPU-ABORT."""
        if self.method == "GET" and "list-type" in self.query or (
                self.method == "GET" and not self.key):
            return "LIST"
        if self.method == "POST" and "delete" in self.query:
            return "BATCH-DELETE"
        fields = urllib.parse.parse_qs(self.query, keep_blank_values=True)
        if self.method == "POST" and "uploads" in fields:
            return "MPU-CREATE"
        if "uploadId" in fields:
            return {"PUT": "MPU-PART", "POST": "MPU-COMPLETE",
                    "DELETE": "MPU-ABORT"}.get(self.method, f"MPU-{self.method}")
        return self.method


@dataclass
class RequestLog:
    requests: list[Request] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    recording: bool = False

    def note(self, environ: dict[str, Any]) -> None:
        if not self.recording:
            return
        path = environ.get("PATH_INFO", "")  # already percent-decoded (WSGI)
        key = path.lstrip("/").partition("/")[2]  # path-style: /bucket/key
        query = environ.get("QUERY_STRING", "")
        prefix = urllib.parse.parse_qs(query).get("prefix")
        request = Request(environ["REQUEST_METHOD"], prefix[0] if prefix and not key else key,
                          query)
        with self._lock:
            self.requests.append(request)

    @contextmanager
    def counting(self) -> Iterator[list[Request]]:
        """The requests sent inside the block (the list fills as they arrive)."""
        with self._lock:
            self.requests = []
            self.recording = True
        try:
            yield self.requests
        finally:
            self.recording = False


def kinds(requests: list[Request]) -> Counter[str]:
    return Counter(r.kind for r in requests)


@dataclass(frozen=True, slots=True)
class CountingEndpoint:
    endpoint_url: str
    log: RequestLog
    fs: Any

    @property
    def storage_options(self) -> dict[str, str]:
        return {"endpoint_url": self.endpoint_url, "key": _KEY, "secret": _SECRET,
                "region": _REGION}

    def make_bucket(self, name: str) -> str:
        self.fs.call_s3("create_bucket", Bucket=name)
        return f"s3://{name}"

    def upload(self, local_dir: str, uri: str) -> None:
        """Copy a local directory tree (e.g. a pypaimon-written warehouse) under ``uri``."""
        self.fs.put(local_dir.rstrip("/") + "/", uri.rstrip("/") + "/", recursive=True)


@contextmanager
def counting_endpoint() -> Iterator[CountingEndpoint]:
    """Start moto's S3 server on 127.0.0.1 with a request log; AWS_* variables must already
    name fake credentials (the caller's job: a fixture's monkeypatch, or a bench's env)."""
    import logging

    import s3fs
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    log = RequestLog()
    app = DomainDispatcherApplication(create_backend_app)

    def logged(environ: dict[str, Any], start_response: Any) -> Any:
        log.note(environ)
        return app(environ, start_response)

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = make_server("127.0.0.1", 0, logged, True, request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        host, port = server.server_address[:2]
        url = f"http://{host}:{port}"
        fs = s3fs.S3FileSystem(endpoint_url=url, key=_KEY, secret=_SECRET,
                               client_kwargs={"region_name": _REGION}, skip_instance_cache=True)
        yield CountingEndpoint(url, log, fs)
    finally:
        server.shutdown()
        thread.join()


FAKE_AWS_ENV = {"AWS_ACCESS_KEY_ID": _KEY, "AWS_SECRET_ACCESS_KEY": _SECRET,
                "AWS_DEFAULT_REGION": _REGION, "AWS_REGION": _REGION,
                "AWS_EC2_METADATA_DISABLED": "true"}


@contextmanager
def isolated_counting_endpoint() -> Iterator[CountingEndpoint]:
    """:func:`counting_endpoint` with the fake credentials set and the caller's AWS profile and
    endpoint variables out of the way; skips without moto, fails under ``CI=true``."""
    import os

    import pytest

    with pytest.MonkeyPatch.context() as mp:
        for name, value in FAKE_AWS_ENV.items():
            mp.setenv(name, value)
        for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(name, raising=False)
        try:
            import moto.server  # noqa: F401
        except ImportError as error:
            if os.environ.get("CI") == "true":
                pytest.fail(f"loopback S3 endpoint unavailable: {error}")
            pytest.skip(f"loopback S3 endpoint unavailable: {error}")
        with counting_endpoint() as started:
            yield started

