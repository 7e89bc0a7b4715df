"""A REST catalog's data tokens (``data-token.enabled``): short-lived storage credentials the
server hands out per table (Java ``RESTTokenFileIO``, ``GetTableTokenResponse``).

A token is a map of Paimon's storage options (``fs.oss.accessKeyId``, ``fs.s3a.access-key``,
...) and the epoch millisecond it expires at. paimond reads and writes a table's files with
the warehouse's own storage options overlaid by the token's, translated to the fsspec options
of the table's scheme; it asks the server for a new token when the one it has expires within
the hour (Java's ``TOKEN_EXPIRATION_SAFE_TIME_MILLIS``). A worker (a process pool, a Spark
executor) gets the token with its task: it cannot ask the server itself. Token values are
credentials: never logged, never in a message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from paimond.clock import Clock
from paimond.errors import ConfigError
from paimond.table.storage.delegating import DelegatingStorage
from paimond.table.storage.interface import Storage, open_storage
from paimond.table.storage.values import StorageLocation

REFRESH_BEFORE_EXPIRY_MS = 3_600_000
MIN_REFRESH_INTERVAL_MS = 60_000  # a token the server hands out already near its end

# Paimon's storage option keys (Java's S3 and OSS FileIOs, which mirror the ``s3.``, ``s3a.``
# and ``fs.s3a.`` prefixes and read Hadoop's dotted and dashed spellings alike, and
# pypaimon's ``fs.s3.*``) -> the fsspec option of the table's scheme.
_S3_KEYS = {
    "key": ("access-key", "access.key"),
    "secret": ("secret-key", "secret.key"),
    "token": ("session-token", "session.token"),
    "endpoint_url": ("endpoint",),
    "region": ("endpoint.region", "region"),
}
_S3_PREFIXES = ("s3.", "s3a.", "fs.s3a.")
_PYPAIMON_S3 = {"fs.s3.accessKeyId": "key", "fs.s3.accessKeySecret": "secret",
                "fs.s3.securityToken": "token", "fs.s3.endpoint": "endpoint_url",
                "fs.s3.region": "region"}
_OSS = {"fs.oss.accessKeyId": "key", "fs.oss.accessKeySecret": "secret",
        "fs.oss.securityToken": "token", "fs.oss.endpoint": "endpoint"}
TRANSLATIONS: dict[str, dict[str, str]] = {
    "s3": {**{p + spelling: name for name, spellings in _S3_KEYS.items()
              for p in _S3_PREFIXES for spelling in spellings}, **_PYPAIMON_S3},
    "oss": dict(_OSS),
}


@dataclass(frozen=True, slots=True)
class DataToken:
    options: Mapping[str, str] = field(repr=False)
    expires_at_ms: int


def token_storage_options(table: str, uri: str, token: DataToken) -> dict[str, str]:
    """The fsspec options ``token`` gives the files of ``table`` at ``uri``. ConfigError
    (naming the table and the token's keys, never their values) when the token is for
    another storage or carries no access key and secret paimond can use."""
    family, translation = _translation(table, uri)
    options = {translation[k]: v for k, v in token.options.items() if k in translation}
    if not {"key", "secret"} <= options.keys():
        keys = ", ".join(sorted(token.options)) or "none"
        raise ConfigError("catalog data-token.enabled",
                          f"the REST catalog's data token for {table} has no {family}:// "
                          f"access key and secret (its keys: {keys})")
    return options


def _translation(table: str, uri: str) -> tuple[str, dict[str, str]]:
    """The storage family of ``uri`` and its token keys; ConfigError for one without."""
    family = uri.partition("://")[0].lower() if "://" in uri else "file"
    family = "s3" if family in ("s3", "s3a", "s3n") else family
    translation = TRANSLATIONS.get(family)
    if translation is None:
        raise ConfigError("catalog data-token.enabled",
                          f"{table} is on {family}://: paimond uses the REST catalog's data "
                          f"tokens on {' and '.join(f'{s}://' for s in TRANSLATIONS)} only")
    return family, translation


class TokenStorage(DelegatingStorage):
    """The files of one table of a REST catalog, read and written with the table's data token:
    the warehouse's storage options overlaid by the token's, renewed before it expires. Its
    location carries the current token, which ships with a worker's task."""

    def __init__(self, table: str, root: str, base_options: Mapping[str, str],
                 fetch: Callable[[], DataToken], clock: Clock) -> None:
        self._table, self._base_options = table, dict(base_options)
        self._fetch, self._clock = fetch, clock
        self._token: DataToken | None = None
        self._fetched_at_ms = 0
        self._opened: Storage | None = None
        self.root = root

    @property
    def _inner(self) -> Storage:  # type: ignore[override]  # renewed, not set once
        now = self._clock.wall_ms()
        stale = (self._token is None
                 or (self._token.expires_at_ms - now < REFRESH_BEFORE_EXPIRY_MS
                     and now - self._fetched_at_ms >= MIN_REFRESH_INTERVAL_MS))
        if stale or self._opened is None:
            _translation(self._table, self.root)  # before asking for a token it cannot use
            token = self._fetch()
            options = {**self._base_options,
                       **token_storage_options(self._table, self.root, token)}
            self._opened = open_storage(self.root, options)
            self._token, self._fetched_at_ms = token, now
        return self._opened

    @property
    def location(self) -> StorageLocation:
        return dataclasses.replace(self._inner.location, vended=True)
