"""Paimon's Hive catalog, the parts a maintainer needs: Java ``HiveCatalog`` (table listing,
locations, ``dropPartitions``), ``HiveCatalogLock`` and the metastore's Thrift API
(``hive_metastore.thrift``), spoken by :mod:`.thrift_codec` (apache/paimon 5dacde516b).

The metastore lists databases (``get_all_databases``), each one's tables (``get_all_tables``,
then ``get_table_objects_by_name`` in batches of 300); a table is Paimon's when its storage
descriptor's input and output formats are ``PaimonInputFormat`` / ``PaimonOutputFormat``,
and it lives at the descriptor's location (``location-in-properties=true``: at the table
parameter ``paimon_location`` when set). Data and metadata are then read and written on the
warehouse's storage as in any warehouse.

With ``lock.enabled`` (default: on object stores, as Java's ``lockEnabled``) every snapshot
commit runs under the metastore's lock, as Java's writers take it: ``lock`` of one EXCLUSIVE
TABLE component (the database, the object name with ``$branch_<b>`` for a branch; user and
host as Java sends them), ``check_lock`` with a sleep doubling from 100 ms up to
``lock-check-max-sleep`` (8 s) while WAITING, for at most ``lock-acquire-timeout`` (8 min),
and ``unlock``. A table with ``metastore.partitioned-table`` has its expired partitions (and
their ``.done`` partitions) dropped from the metastore (``drop_partition``, ``deleteData``
false, a missing partition ignored) before the drop is committed, as Java's catalog does.

Options, as Paimon's Hive catalog options: ``uri`` (``thrift://host:port``, several
comma-separated; without it, ``hive.metastore.uris`` of ``hive-site.xml`` in
``hive-conf-dir``), ``warehouse``, ``lock.enabled``, ``lock-acquire-timeout``,
``lock-check-max-sleep``, ``location-in-properties``. A metastore behind Kerberos/SASL
(``hive.metastore.sasl.enabled``) is refused: paimond speaks the plain binary protocol only.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import time
import urllib.parse
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paimond.errors import CodecError, ConfigError, StorageUnavailableError
from paimond.table.catalogs.jdbc import ACQUIRE_TIMEOUT_MS, CHECK_MAX_SLEEP_MS, parse_duration
from paimond.table.catalogs.thrift_codec import (
    BOOL,
    I16,
    I32,
    I64,
    LIST,
    STRING,
    STRUCT,
    Field,
    ThriftApplicationError,
    ThriftConnection,
)

KNOWN_OPTIONS = frozenset({"metastore", "uri", "warehouse", "lock.enabled",
                           "lock-acquire-timeout", "lock-check-max-sleep", "hive-conf-dir",
                           "location-in-properties", "client-pool-size"})
INPUT_FORMAT = "org.apache.paimon.hive.mapred.PaimonInputFormat"
OUTPUT_FORMAT = "org.apache.paimon.hive.mapred.PaimonOutputFormat"
LOCATION_PROPERTY = "paimon_location"
TABLE_BATCH = 300  # Java: hive.metastore.batch.retrieve.max
TIMEOUT_S = 60.0
# hive_metastore.thrift: LockType.EXCLUSIVE, LockLevel.TABLE, LockState
EXCLUSIVE, TABLE_LEVEL = 3, 2
ACQUIRED, WAITING = 1, 2
LOCK_STATES = {1: "ACQUIRED", 2: "WAITING", 3: "ABORT", 4: "NOT_ACQUIRED"}


@dataclass(frozen=True, slots=True)
class HiveCatalogConfig:
    uris: tuple[tuple[str, int], ...]
    lock_enabled: bool | None = None  # None: Java's default, on an object store
    acquire_timeout_ms: int = ACQUIRE_TIMEOUT_MS
    check_max_sleep_ms: int = CHECK_MAX_SLEEP_MS
    location_in_properties: bool = False

    @property
    def uri(self) -> str:
        return ",".join(f"thrift://{host}:{port}" for host, port in self.uris)

    @classmethod
    def of(cls, options: Mapping[str, str]) -> HiveCatalogConfig:
        """From Paimon's catalog options; ConfigError naming an unknown or bad one."""
        unknown = sorted(set(options) - KNOWN_OPTIONS)
        if unknown:
            raise ConfigError("catalog", f"unknown Hive catalog option(s) {', '.join(unknown)} "
                                         f"(known: {', '.join(sorted(KNOWN_OPTIONS))})")
        site = _hive_site(options["hive-conf-dir"]) if "hive-conf-dir" in options else {}
        if site.get("hive.metastore.sasl.enabled", "false").lower() == "true":
            raise ConfigError("hive-conf-dir", "hive.metastore.sasl.enabled=true: paimond speaks "
                                               "the metastore's plain binary protocol only "
                                               "(no Kerberos/SASL)")
        text = options.get("uri") or site.get("hive.metastore.uris", "")
        if not text:
            raise ConfigError("catalog uri", "a Hive catalog needs uri = 'thrift://host:port' "
                                             "(or hive-conf-dir with hive.metastore.uris)")
        return cls(tuple(_host_port(part.strip()) for part in text.split(",") if part.strip()),
                   _bool(options, "lock.enabled"),
                   parse_duration(options, "lock-acquire-timeout", ACQUIRE_TIMEOUT_MS),
                   parse_duration(options, "lock-check-max-sleep", CHECK_MAX_SLEEP_MS),
                   bool(_bool(options, "location-in-properties")))


def _bool(options: Mapping[str, str], key: str) -> bool | None:
    text = options.get(key)
    if text is None:
        return None
    if text.lower() not in ("true", "false"):
        raise ConfigError(key, f"{text!r} is not true or false")
    return text.lower() == "true"


def _host_port(uri: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(uri)
    try:
        port = parsed.port
    except ValueError:
        port = None
    if parsed.scheme != "thrift" or not parsed.hostname or port is None:
        raise ConfigError("catalog uri", f"{uri!r} is not thrift://host:port")
    return parsed.hostname, port


def _hive_site(directory: str) -> dict[str, str]:
    """The properties of ``<directory>/hive-site.xml``."""
    path = os.path.join(directory, "hive-site.xml")
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as error:
        raise ConfigError("hive-conf-dir", f"{path}: {error}") from None
    return {(item.findtext("name") or "").strip(): (item.findtext("value") or "").strip()
            for item in root.iter("property")}


@dataclass(frozen=True, slots=True)
class HiveTable:
    database: str
    name: str
    path: str  # the table's location


class HiveCatalog:
    """One Hive metastore: its Paimon tables, its lock and its partitions (module
    docstring). Each call opens a connection to the first metastore that answers."""

    def __init__(self, config: HiveCatalogConfig) -> None:
        self.config = config

    @contextlib.contextmanager
    def _connection(self) -> Iterator[ThriftConnection]:
        failures = []
        for host, port in self.config.uris:
            try:
                connection = ThriftConnection(host, port, TIMEOUT_S)
            except OSError as error:
                failures.append(f"{host}:{port}: {error}")
                continue
            try:
                yield connection
            except (OSError, CodecError) as error:
                raise StorageUnavailableError(f"thrift://{host}:{port}",
                                              f"{type(error).__name__}: {error}") from error
            finally:
                connection.close()
            return
        raise StorageUnavailableError(self.config.uri, "; ".join(failures))

    def _call(self, method: str, *arguments: Field, expected: tuple[int, ...] = ()) -> Any:
        """The return value of ``method``; its declared exception number ``expected`` (1-based,
        as the IDL lists them) is raised as :class:`MetastoreError`, any other failure as
        StorageUnavailableError."""
        with self._connection() as connection:
            try:
                result = connection.call(method, *arguments)
            except ThriftApplicationError as error:
                raise StorageUnavailableError(self.config.uri, str(error)) from error
        failures = {key: value for key, value in result.items() if key != 0}
        if failures:
            number, detail = next(iter(failures.items()))
            text = detail.get(1, "") if isinstance(detail, dict) else str(detail)
            if number in expected:
                raise MetastoreError(method, number, text)
            raise StorageUnavailableError(self.config.uri, f"{method}: {text}")
        return result.get(0)

    def tables(self) -> list[HiveTable]:
        """Every Paimon table of the metastore, sorted by database and name."""
        found = []
        for database in sorted(self._call("get_all_databases") or []):
            names = sorted(self._call("get_all_tables", Field(1, STRING, database)) or [])
            for start in range(0, len(names), TABLE_BATCH):
                batch = names[start:start + TABLE_BATCH]
                for table in self._call("get_table_objects_by_name",
                                        Field(1, STRING, database),
                                        Field(2, LIST, (STRING, batch))) or []:
                    location = self._location(table)
                    if location is not None:
                        found.append(HiveTable(database, table.get(1, ""), location))
        return sorted(found, key=lambda t: (t.database, t.name))

    def table(self, database: str, name: str) -> HiveTable:
        """One table; ConfigError when the metastore has no such Paimon table."""
        try:
            table = self._call("get_table", Field(1, STRING, database), Field(2, STRING, name),
                               expected=(2,))  # NoSuchObjectException
        except MetastoreError as error:
            raise ConfigError("catalog", f"{database}.{name}: not in the Hive metastore "
                                         f"{self.config.uri} ({error.detail})") from None
        location = self._location(table)
        if location is None:
            raise ConfigError("catalog", f"{database}.{name} in the Hive metastore "
                                         f"{self.config.uri} is no Paimon table")
        return HiveTable(database, name, location)

    def _location(self, table: Mapping[int, Any]) -> str | None:
        """A Paimon table's location (Table 7: sd, 9: parameters; StorageDescriptor 2:
        location, 3: inputFormat, 4: outputFormat); None for any other table."""
        descriptor = table.get(7) or {}
        if descriptor.get(3) != INPUT_FORMAT or descriptor.get(4) != OUTPUT_FORMAT:
            return None
        parameters = table.get(9) or {}
        if self.config.location_in_properties and parameters.get(LOCATION_PROPERTY):
            return str(parameters[LOCATION_PROPERTY])
        return str(descriptor.get(2) or "") or None

    def drop_partitions(self, database: str, name: str,
                        partitions: Sequence[Sequence[str]]) -> int:
        """Drop each partition (its values in partition-key order) from the metastore, keeping
        the data (``deleteData`` false); a partition the metastore does not have is skipped.
        Answers how many it dropped."""
        dropped = 0
        for values in partitions:
            try:
                dropped += bool(self._call("drop_partition", Field(1, STRING, database),
                                           Field(2, STRING, name),
                                           Field(3, LIST, (STRING, list(values))),
                                           Field(4, BOOL, False), expected=(1,)))
            except MetastoreError:  # 1: NoSuchObjectException, as Java ignores it
                pass
        return dropped

    def partition_names(self, database: str, name: str) -> list[str]:
        """The metastore's partition names of the table (``k=v/k2=v2``)."""
        return list(self._call("get_partition_names", Field(1, STRING, database),
                               Field(2, STRING, name), Field(3, I16, -1)) or [])

    @contextlib.contextmanager
    def lock(self, database: str, name: str) -> Iterator[None]:
        """Hold the metastore's lock of table ``database.name`` (``name`` with
        ``$branch_<b>`` for a branch) as Java's ``HiveCatalogLock.runWithLock``;
        StorageUnavailableError (back off, retry) when it is not acquired in time."""
        component = (Field(1, I32, EXCLUSIVE), Field(2, I32, TABLE_LEVEL),
                     Field(3, STRING, database), Field(4, STRING, name))
        request = (Field(1, LIST, (STRUCT, [component])), Field(3, STRING, _user()),
                   Field(4, STRING, socket.gethostname()))
        started = time.monotonic()
        response = self._call("lock", Field(1, STRUCT, request))
        lock_id, state = int(response.get(1, 0)), response.get(2)
        sleep_ms = 50
        try:
            while state == WAITING and (time.monotonic() - started) * 1000 < \
                    self.config.acquire_timeout_ms:
                sleep_ms = min(sleep_ms * 2, self.config.check_max_sleep_ms)
                time.sleep(sleep_ms / 1000)
                state = self._call("check_lock", Field(1, STRUCT, (Field(1, I64, lock_id),))
                                   ).get(2)
        finally:
            if state != ACQUIRED:
                self._unlock(lock_id)
        if state != ACQUIRED:
            raise StorageUnavailableError(
                self.config.uri, f"lock of {database}.{name} (lockId={lock_id}) not acquired "
                                 f"in {round((time.monotonic() - started) * 1000)} ms: "
                                 f"{LOCK_STATES.get(state, state)}")
        try:
            yield
        finally:
            self._unlock(lock_id)

    def _unlock(self, lock_id: int) -> None:
        """Release ``lock_id``; a failure is left to the metastore's lock timeout, as Java
        leaves it."""
        if lock_id <= 0:
            return
        with contextlib.suppress(StorageUnavailableError):
            self._call("unlock", Field(1, STRUCT, (Field(1, I64, lock_id),)))


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "paimond"


class MetastoreError(Exception):
    """A metastore method raised the declared exception ``number`` its caller expects (never
    leaves this module)."""

    def __init__(self, method: str, number: int, detail: str) -> None:
        super().__init__(f"{method}: {detail or 'exception ' + str(number)}")
        self.method, self.number, self.detail = method, number, detail
