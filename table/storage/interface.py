"""The one storage interface: every byte paimond reads or writes goes through a ``Storage``.

Java counterparts: ``FileIO`` (``LocalFileIO``, the S3 FileIO) and the atomic step of
``RenamingSnapshotCommit`` (apache/paimon master @ 5dacde516b, as in the reference notes).
Unlike Paimon, ``create_exclusive`` needs no lock: a hard link locally, a conditional PUT
(``If-None-Match: *``) on S3 and on Azure Blob storage (``table.storage.schemes``).

Paths given to a ``Storage`` are full URIs (``s3://bucket/key``, ``/abs/path``,
``file:///abs``) or paths relative to its root; paths it returns or names in errors are full
URIs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, BinaryIO, Protocol

from paimond.errors import ConfigError
from paimond.table.storage.fsspec_storage import FsspecStorage
from paimond.table.storage.output_stream import OutputStream
from paimond.table.storage.s3_options import parse_option_values, s3_unavailable_errors, s3fs_arguments
from paimond.table.storage.schemes import scheme_of
from paimond.table.storage.values import CREDENTIAL_OPTIONS, FileStatus, StorageLocation

# the interface and the types in its signatures (defined in table/storage/values.py and
# table/storage/output_stream.py; the fsspec implementation is table/storage/fsspec_storage.py)
__all__ = ["FileStatus", "OutputStream", "Storage", "StorageLocation", "open_storage"]


class Storage(Protocol):
    root: str

    @property
    def location(self) -> StorageLocation: ...

    def join(self, *parts: str) -> str: ...
    def read_bytes(self, path: str) -> bytes: ...
    def read_text(self, path: str) -> str: ...
    def open_input(self, path: str, *, buffered: bool = True,
                   size: int | None = None) -> BinaryIO: ...
    def open_output(self, path: str) -> OutputStream: ...
    def write_bytes(self, path: str, data: bytes) -> None: ...
    def create_exclusive(self, path: str, data: bytes) -> bool: ...
    def exists(self, path: str) -> bool: ...
    def is_file(self, path: str) -> bool: ...
    def size(self, path: str) -> int: ...
    def list_dir(self, path: str) -> list[FileStatus]: ...
    def delete(self, path: str) -> bool: ...
    def delete_many(self, paths: Sequence[str],
                    on_deleted: Callable[[str], object] | None = None) -> None: ...
    def delete_dir_if_empty(self, path: str) -> bool: ...
    def mtime(self, path: str) -> float | None: ...


def open_storage(uri: str, options: Mapping[str, Any] | None = None) -> Storage:
    """Open ``uri`` (a local path, ``file://``, ``s3://``, or another scheme of
    ``table.storage.schemes``) as a ``Storage``; ConfigError for a scheme paimond does not know
    or whose implementation is not installed.

    S3 options: ``endpoint_url``, ``key``/``access_key_id``, ``secret``/``secret_access_key``,
    ``token``/``session_token``, ``region``, ``anon``, ``connect_timeout_s``, ``read_timeout_s``,
    ``max_attempts``; any other option is passed to s3fs. Unset ones fall back to
    ``PAIMOND_S3_ENDPOINT_URL`` and the variables botocore reads itself (``AWS_*``).
    """
    scheme = scheme_of(uri)  # an unknown scheme, or one not installed: ConfigError
    protocol, _, rest = uri.partition("://") if "://" in uri else ("", "", uri)
    if protocol == "" and rest.startswith("file:"):
        protocol, rest = "file", rest[5:]
    options = dict(options or {})
    try:
        storage = _open_fsspec(protocol.lower(), rest, uri, options)
    except OSError as error:  # hdfs: libhdfs or its JVM cannot be loaded
        if scheme.protocol != "hdfs":
            raise
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError("warehouse", f"{uri}: hdfs:// needs {scheme.install} ({reason})"
                          ) from None
    storage.location = StorageLocation(storage.root, options)
    return storage


# adlfs options that are credentials: never in a message or a log line
_AZURE_SECRETS = ("account_key", "connection_string", "sas_token", "client_secret", "credential")


def _open_fsspec(protocol: str, rest: str, uri: str, options: dict[str, Any]) -> FsspecStorage:
    if protocol in ("", "file", "local"):
        prefix = "file://" if protocol else ""
        # local files go through os (table/storage/local_files.py): fsspec is not even imported
        return FsspecStorage(None, "local", prefix, os.path.abspath(rest), frozenset())
    import fsspec

    if protocol in ("s3", "s3a"):
        kwargs, secrets, attempts = s3fs_arguments(options)
        fs = fsspec.filesystem("s3", **kwargs)
        if attempts is not None:
            fs.retries = attempts
        unavailable = s3_unavailable_errors()
        return FsspecStorage(fs, "s3", f"{protocol}://", rest, secrets, unavailable)
    if protocol in ("abfs", "abfss", "az"):
        from azure.core.exceptions import ServiceRequestError, ServiceResponseError

        fs = fsspec.filesystem("abfs", skip_instance_cache=True, use_listings_cache=False,
                               **fsspec.get_filesystem_class("abfs")._get_kwargs_from_urls(uri),
                               **parse_option_values(options))
        secrets = frozenset(str(options[k]) for k in _AZURE_SECRETS if options.get(k))
        return FsspecStorage(fs, "azure", f"{protocol}://", fs._strip_protocol(uri), secrets,
                             (OSError, ServiceRequestError, ServiceResponseError))
    implementation = fsspec.get_filesystem_class(protocol)
    kwargs = {"skip_instance_cache": True, "use_listings_cache": False,
              **implementation._get_kwargs_from_urls(uri), **options}  # host, account, ...
    fs = implementation(**parse_option_values(kwargs))
    kind = "memory" if protocol == "memory" else "other"
    secrets = frozenset(str(v) for k, v in options.items() if k in CREDENTIAL_OPTIONS and v)
    return FsspecStorage(fs, kind, f"{protocol}://", fs._strip_protocol(uri), secrets)
