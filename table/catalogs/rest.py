"""Paimon's REST catalog, the client side: Java ``RESTApi``, ``ResourcePaths``,
``RESTSnapshotCommit`` (apache/paimon release-2.0.0), and the REST catalog's OpenAPI spec
(``docs/static/rest-catalog-open-api.yaml``).

The catalog is an HTTP server. ``GET /v1/config?warehouse=<name>`` answers the catalog's
options (``defaults``, overridden by the client's own, overridden by ``overrides``), among
them ``prefix``: every other resource lives under ``/v1/<prefix>/``. paimond lists the
databases (``databases``) and each one's tables with their locations (``table-details``),
both paged (``maxResults``, ``pageToken`` / ``nextPageToken``); data and metadata files are
then read and written on the warehouse's storage as in any warehouse.

A table of a REST catalog is committed through the server, as Java's writers commit it: the
new snapshot goes to ``POST .../databases/<db>/tables/<table>/commit`` with the table's id,
the uuid of the snapshot it builds on, and the commit's per-partition statistics; the server
writes the snapshot file if the table's latest is still that snapshot, and answers
``{"success": false}`` when another commit got there first (paimond then retries as after any
lost race). A branch commits as ``<table>$branch_<name>``.

Options, as Paimon's: ``uri`` (the server's base URL), ``warehouse`` (the catalog's warehouse
name, sent to ``/v1/config``), ``token.provider`` (``bear``, the only one paimond speaks) and
``header.<name>`` (extra request headers), and ``data-token.enabled`` (the table's files are
read and written with the credentials the server hands out for it: ``data_token.py``; the
server's ``overrides`` win over the client's option, which wins over its ``defaults``). The
bearer token comes from the environment (``PAIMOND_REST_TOKEN``), never from the options.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from paimond.errors import ConfigError, StorageUnavailableError
from paimond.table.catalogs.data_token import DataToken

DATA_TOKEN_OPTION = "data-token.enabled"
KNOWN_OPTIONS = frozenset({"metastore", "uri", "warehouse", "token.provider", DATA_TOKEN_OPTION})
HEADER_PREFIX = "header."
BEARER = "bear"
TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class RestCatalogConfig:
    uri: str
    warehouse: str | None = None
    token: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict)
    data_token: bool | None = None  # None: as the server's configuration says

    @classmethod
    def of(cls, options: Mapping[str, str], token: str | None = None) -> RestCatalogConfig:
        """From Paimon's catalog options; ConfigError naming an unknown or bad one."""
        unknown = sorted(k for k in set(options) - KNOWN_OPTIONS
                         if not k.startswith(HEADER_PREFIX))
        if unknown:
            raise ConfigError("catalog", f"unknown REST catalog option(s) {', '.join(unknown)} "
                                         f"(known: {', '.join(sorted(KNOWN_OPTIONS))}, "
                                         f"{HEADER_PREFIX}<name>)")
        uri = options.get("uri", "").rstrip("/")
        if urllib.parse.urlsplit(uri).scheme not in ("http", "https"):
            raise ConfigError("catalog uri", f"{uri!r}: a REST catalog's uri is the server's "
                                             "http:// or https:// base URL")
        provider = options.get("token.provider", BEARER if token else None)
        if provider is not None and provider != BEARER:
            raise ConfigError("catalog token.provider",
                              f"{provider!r}: paimond authenticates to a REST catalog with a "
                              f"bearer token only (token.provider={BEARER})")
        if provider == BEARER and not token:
            raise ConfigError("catalog token.provider",
                              "bear needs the token in the environment (PAIMOND_REST_TOKEN)")
        headers = {k[len(HEADER_PREFIX):]: v for k, v in options.items()
                   if k.startswith(HEADER_PREFIX)}
        data_token = options.get(DATA_TOKEN_OPTION)
        return cls(uri, options.get("warehouse"), token, headers,
                   None if data_token is None else _flag(f"catalog {DATA_TOKEN_OPTION}",
                                                         data_token))


@dataclass(frozen=True, slots=True)
class RestTable:
    """What the catalog says of one table (Java ``GetTableResponse``)."""

    database: str
    name: str
    id: str
    path: str
    external: bool


class RestCatalog:
    """One REST catalog (module docstring). The first request fetches its configuration."""

    def __init__(self, config: RestCatalogConfig) -> None:
        self.config = config
        self._prefix: str | None = None
        self._data_tokens = False
        self._tables: dict[tuple[str, str], RestTable] = {}

    # -- HTTP ------------------------------------------------------------------------------

    def _request(self, method: str, path: str, query: Mapping[str, str] | None = None,
                 body: object = None) -> Any:
        """The JSON answer of one request; ConfigError for a refused or unknown resource,
        StorageUnavailableError (retried later) when the server cannot be reached or fails."""
        url = self.config.uri + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        headers = {"Content-Type": "application/json", **self.config.headers}
        if self.config.token:
            headers["Authorization"] = f"Bearer {self.config.token}"
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise _http_error(method, path, error) from None
        except (TimeoutError, urllib.error.URLError, ConnectionError) as error:
            reason = getattr(error, "reason", error)
            raise StorageUnavailableError(self.config.uri, f"{method} {path}: {reason}") from None
        try:
            return json.loads(text) if text else {}
        except ValueError:
            raise StorageUnavailableError(self.config.uri, f"{method} {path}: the answer is "
                                                           "not JSON") from None

    def _paged(self, path: str, key: str) -> Iterator[Any]:
        token: str | None = None
        while True:
            answer = self._request("GET", path, {"pageToken": token} if token else None)
            yield from answer.get(key) or ()
            token = answer.get("nextPageToken")
            if not token:
                return

    @property
    def prefix(self) -> str:
        """``/v1/<prefix>`` (or ``/v1`` without one), from the server's configuration."""
        if self._prefix is None:
            query = {"warehouse": self.config.warehouse} if self.config.warehouse else None
            answer = self._request("GET", "/v1/config", query)
            defaults, overrides = answer.get("defaults") or {}, answer.get("overrides") or {}
            prefix = {**defaults, **overrides}.get("prefix")
            data_token = overrides.get(DATA_TOKEN_OPTION)
            if data_token is None:
                data_token = self.config.data_token
            if data_token is None:
                data_token = defaults.get(DATA_TOKEN_OPTION, False)
            self._data_tokens = _flag(f"the REST catalog's {DATA_TOKEN_OPTION}", data_token)
            self._prefix = f"/v1/{_segment(prefix)}" if prefix else "/v1"
        return self._prefix

    @property
    def data_tokens(self) -> bool:
        """Whether the tables' files are read and written with the server's data tokens."""
        _ = self.prefix  # the server's configuration, fetched once
        return self._data_tokens

    def _table_path(self, database: str, table: str) -> str:
        return f"{self.prefix}/databases/{_segment(database)}/tables/{_segment(table)}"

    # -- the catalog -----------------------------------------------------------------------

    def databases(self) -> list[str]:
        return sorted(self._paged(f"{self.prefix}/databases", "databases"))

    def tables(self) -> list[RestTable]:
        """Every table of every database, sorted by ``db.table``."""
        found = []
        for database in self.databases():
            details = f"{self.prefix}/databases/{_segment(database)}/table-details"
            for answer in self._paged(details, "tableDetails"):
                found.append(_rest_table(database, answer))
        for table in found:
            self._tables[(table.database, table.name)] = table
        return sorted(found, key=lambda t: (t.database, t.name))

    def table_names(self) -> list[str]:
        return [f"{t.database}.{t.name}" for t in self.tables()]

    def table(self, database: str, name: str) -> RestTable:
        """One table (``name`` without a branch suffix), fetched on first use."""
        known = self._tables.get((database, name))
        if known is None:
            known = _rest_table(database, self._request("GET", self._table_path(database, name)))
            self._tables[(database, name)] = known
        return known

    def table_token(self, database: str, name: str) -> DataToken:
        """The data token the server hands out for ``database.name`` now (Java
        ``GetTableTokenResponse``)."""
        answer = self._request("GET", f"{self._table_path(database, name)}/token")
        token, expires = answer.get("token"), answer.get("expiresAtMillis")
        if not isinstance(token, dict) or not isinstance(expires, int):
            raise ConfigError("catalog", f"the REST catalog's data token for {database}.{name} "
                                         "is no {token, expiresAtMillis} object")
        return DataToken({str(k): str(v) for k, v in token.items()}, expires)

    def commit_snapshot(self, database: str, name: str, snapshot: Mapping[str, Any],
                        base_uuid: str | None,
                        statistics: Sequence[Mapping[str, Any]]) -> bool:
        """Commit ``snapshot`` (its JSON object) to ``database.name`` (``$branch_<b>`` for a
        branch) through the server; False when the table's latest snapshot is no longer the
        one of ``base_uuid`` (another commit won)."""
        table = self.table(database, name.partition("$branch_")[0])
        if table.external:
            raise ConfigError("catalog", f"{database}.{name} is an external table of the REST "
                                         "catalog: its server takes no commits")
        answer = self._request("POST", f"{self._table_path(database, name)}/commit",
                               body={"tableId": table.id, "baseSnapshotUuid": base_uuid,
                                     "snapshot": snapshot, "statistics": list(statistics)})
        return bool(answer.get("success"))


def _flag(key: str, value: object) -> bool:
    """A Paimon boolean option (``true``/``false``, any case); ConfigError naming ``key``."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(key, f"{value!r}: true or false")
    return text == "true"


def _segment(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _rest_table(database: str, answer: Mapping[str, Any]) -> RestTable:
    return RestTable(database, str(answer.get("name")), str(answer.get("id")),
                     str(answer.get("path")), bool(answer.get("isExternal")))


def _http_error(method: str, path: str, error: urllib.error.HTTPError) -> Exception:
    try:
        detail = json.loads(error.read()).get("message") or ""
    except (ValueError, AttributeError, OSError):
        detail = ""
    what = f"{method} {path}: HTTP {error.code}{f' ({detail})' if detail else ''}"
    if error.code in (401, 403):
        return ConfigError("catalog token", f"the REST catalog refused {what}")
    if error.code == 404:
        return ConfigError("catalog", f"the REST catalog has no such resource: {what}")
    if error.code >= 500 or error.code == 429:
        return StorageUnavailableError(error.url or path, what)
    return ConfigError("catalog", f"the REST catalog rejected {what}")
