"""The daemon's settings: a TOML (or YAML) file overridden by ``PAIMOND_*`` environment
variables, validated into frozen dataclasses. Nothing is read at import time.

Every key can be overridden as ``PAIMOND_<SECTION>_<KEY>`` (``PAIMOND_HTTP_PORT=9200``,
``PAIMOND_JOBS_COMPACT_INTERVAL_S=30``); ``PAIMOND_WAREHOUSE`` adds a warehouse URI and
``PAIMOND_EXECUTOR`` sets ``executor``. An unknown section, job or key, in the file or in a
``PAIMOND_<SECTION>_...`` variable, is refused like a bad value: ConfigError names the key (or
the variable), and ``paimond run`` exits with code 2. The keys are declared once in ``KEYS``
(and ``POLICY_KEYS``, and the job registry's settings types for ``[jobs.<name>]``, handed in as
``jobs``); the loader parses by those declarations and ``config/reference.py`` documents them.
Credentials never live in the file: the trigger token comes from ``PAIMOND_TRIGGER_TOKEN`` or
``http.trigger_token_file``, S3 credentials from the usual AWS variables or files.
"""

from __future__ import annotations

import fnmatch
import os
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from paimond.config.declare import Declared, Key
from paimond.config.jobs import DaemonJob, JobSection, JobsSettings, parse_jobs
from paimond.config.policy import TablePolicy, parse_policies, policy_for
from paimond.errors import ConfigError

__all__ = ["KEYS", "JobSection", "JobsSettings", "Settings", "WarehouseSettings", "load_settings"]
# A catalog option that would hold a secret -> where the secret comes from instead.
_CATALOG_SECRETS = {"jdbc.password": "PAIMOND_JDBC_PASSWORD", "token": "PAIMOND_REST_TOKEN"}
_SECRET_KEYS = {"key", "secret", "token", "access_key_id", "secret_access_key", "session_token",
                "password"}


@dataclass(frozen=True, slots=True)
class WarehouseSettings:
    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict)
    catalog: Mapping[str, str] = field(default_factory=dict)  # Paimon catalog options
    # The JDBC password (PAIMOND_JDBC_PASSWORD) or REST token (PAIMOND_REST_TOKEN)
    catalog_secret: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        shown = {k: ("***" if k in _SECRET_KEYS else v) for k, v in self.storage_options.items()}
        return (f"WarehouseSettings(uri={self.uri!r}, storage_options={shown!r}, "
                f"catalog={dict(self.catalog)!r})")


@dataclass(frozen=True, slots=True)
class Settings:
    """The loaded settings; every field comes from a declared key (``KEYS``)."""

    warehouses: tuple[WarehouseSettings, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    jobs: JobsSettings
    concurrency: int
    memory_budget_mb: int  # compaction tasks running at once, all tables (maintenance.memory)
    executor: str  # where the daemon's compaction tasks run: local, spark
    http_host: str
    http_port: int
    trigger_token: str | None = field(repr=False)
    console_auth: bool
    log_format: str
    log_level: str
    lease_ttl_s: float
    grace_s: float
    check_interval_s: float
    idle_check_interval_s: float
    liveness_timeout_s: float
    discovery_interval_s: float
    backoff_base_s: float
    backoff_max_s: float
    quarantine_after: int
    lookup_cache_dir: str | None
    lookup_cache_max_mb: int
    replica_id: str
    policies: tuple[TablePolicy, ...]

    def wants(self, table_name: str) -> bool:
        """Whether ``db.table`` is maintained (include patterns, minus exclude patterns)."""
        return (any(fnmatch.fnmatchcase(table_name, p) for p in self.include)
                and not any(fnmatch.fnmatchcase(table_name, p) for p in self.exclude))

    def job(self, name: str) -> JobSection:
        """The section of job ``name`` (a job of the registry the settings were loaded with)."""
        return self.jobs.by_name(name)

    def policy(self, table_name: str) -> TablePolicy | None:
        """The first ``[[policies]]`` entry matching ``db.table``, or None."""
        return policy_for(self.policies, table_name)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(str(path), f"cannot read the config file: {error.strerror}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise ConfigError(str(path), "YAML config needs PyYAML; use TOML") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as error:
            raise ConfigError(str(path), f"invalid YAML: {error}") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(str(path), f"invalid TOML: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), "the config file must hold a table of settings")
    return data


def _table(data: dict[str, Any], name: str, key: str) -> dict[str, Any]:
    value = data.setdefault(name, {})
    if not isinstance(value, dict):
        raise ConfigError(key, "expected a table of settings")
    return value


def _apply_env(data: dict[str, Any], env: Mapping[str, str], job_names: tuple[str, ...]
               ) -> dict[str, str]:
    """``PAIMOND_<SECTION>_<KEY>`` (and ``PAIMOND_JOBS_<JOB>_<KEY>``) override file values.

    Returns which variable set which key, so that an error names the variable. Variables
    outside the sections (``PAIMOND_S3_ENDPOINT_URL``, ``PAIMOND_TRIGGER_TOKEN``) are read
    elsewhere and left alone here."""
    origins: dict[str, str] = {}
    for name, value in sorted(env.items()):
        if not name.startswith("PAIMOND_"):
            continue
        rest = name[len("PAIMOND_"):].lower()
        if rest == "warehouse":
            warehouses = data.setdefault("warehouses", [])
            if not isinstance(warehouses, list):
                raise ConfigError("warehouses", "expected a list of warehouses")
            origins[f"warehouses[{len(warehouses)}].uri"] = name
            warehouses.append({"uri": value})
        elif rest == "executor":
            data["executor"] = value
            origins["executor"] = name
        elif rest.startswith("policies_"):  # a list of tables: no variable can name one
            raise ConfigError(name, "policies are set in the config file only ([[policies]])")
        elif rest.startswith("jobs_"):
            # the longest name that fits: jobs_expire_partitions_x is not expire's key
            job = max((j for j in job_names if rest.startswith(f"jobs_{j}_")), key=len,
                      default=None)
            if job is None:
                raise ConfigError(name, f"unknown job; jobs are {', '.join(job_names)}")
            key = rest[len(f"jobs_{job}_"):]
            _table(_table(data, "jobs", "jobs"), job, f"jobs.{job}")[key] = value
            origins[f"jobs.{job}.{key}"] = name
        else:
            section = next((s for s in _SECTIONS if rest.startswith(s + "_")), None)
            if section is not None:
                key = rest[len(section) + 1:]
                _table(data, section, section)[key] = value
                origins[f"{section}.{key}"] = name
    return origins


def _patterns(raw: Any, key: str) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [p.strip() for p in raw.split(",") if p.strip()]
    if not isinstance(raw, list) or not all(isinstance(p, str) for p in raw):
        raise ConfigError(key, "expected a list of db.table patterns")
    return tuple(raw)


def _warehouses(raw: Any, env: Mapping[str, str]) -> tuple[WarehouseSettings, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError("warehouses", "at least one warehouse is needed "
                                        "([[warehouses]] uri = ... or PAIMOND_WAREHOUSE)")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("uri"), str) or not item["uri"]:
            raise ConfigError(f"warehouses[{i}].uri", "a warehouse needs a uri")
        known = sorted(k.leaf for k in KEYS if k.section == "warehouses")
        unknown = sorted(set(item) - set(known))
        if unknown:
            raise ConfigError(f"warehouses[{i}].{unknown[0]}",
                              f"unknown key; known: {', '.join(known)}")
        options = item.get("storage_options", {})
        if not isinstance(options, dict):
            raise ConfigError(f"warehouses[{i}].storage_options", "expected a table of options")
        secrets = sorted(set(options) & _SECRET_KEYS)
        if secrets:
            raise ConfigError(f"warehouses[{i}].storage_options.{secrets[0]}",
                              "credentials do not belong in the config file; use the "
                              "environment (AWS_ACCESS_KEY_ID, ...) or credential files")
        catalog = item.get("catalog", {})
        if not isinstance(catalog, dict):
            raise ConfigError(f"warehouses[{i}].catalog", "expected a table of Paimon catalog "
                                                          "options")
        for key, variable in _CATALOG_SECRETS.items():
            if key in catalog:
                raise ConfigError(f"warehouses[{i}].catalog.{key}",
                                  "credentials do not belong in the config file; use the "
                                  f"environment ({variable})")
        variable = _CATALOG_SECRETS["token" if catalog.get("metastore") == "rest"
                                    else "jdbc.password"]
        out.append(WarehouseSettings(item["uri"], {str(k): str(v) for k, v in options.items()},
                                     {str(k): str(v) for k, v in catalog.items()},
                                     env.get(variable)))
    return tuple(out)


def _token(http: Mapping[str, Any], env: Mapping[str, str]) -> str | None:
    if env.get("PAIMOND_TRIGGER_TOKEN"):
        return env["PAIMOND_TRIGGER_TOKEN"]
    path = http.get("trigger_token_file")
    if not path:
        return None
    try:
        token = Path(str(path)).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ConfigError("http.trigger_token_file", f"cannot read {path}: {error.strerror}") from None
    if not token:
        raise ConfigError("http.trigger_token_file", f"{path} is empty")
    return token


KEYS = (
    Key("executor", str, "local",
        Declared("where the daemon's compaction tasks run", choices=("local", "spark")),
        attr="executor"),
    Key("warehouses.uri", "str", None,
        Declared("a warehouse's URI ([[warehouses]], at least one; or PAIMOND_WAREHOUSE)")),
    Key("warehouses.storage_options", "table of strings", None,
        Declared("the warehouse's storage options (no credentials: those come from the "
                 "environment or credential files)")),
    Key("warehouses.catalog", "table of strings", None,
        Declared("the Paimon catalog the warehouse is registered in, as Paimon's catalog "
                 "options: metastore = \"jdbc\" (uri = \"jdbc:sqlite:...\" or "
                 "\"jdbc:postgresql://...\", catalog-key, lock.enabled, lock-acquire-timeout, "
                 "lock-check-max-sleep; the password: PAIMOND_JDBC_PASSWORD) or metastore = "
                 "\"rest\" (uri = \"http://...\", warehouse, token.provider = \"bear\", "
                 "header.<name>; the token: PAIMOND_REST_TOKEN) or metastore = \"hive\" (uri = "
                 "\"thrift://host:port\" or hive-conf-dir, lock.enabled, lock-acquire-timeout, "
                 "lock-check-max-sleep, location-in-properties); unset: the warehouse's "
                 "directories")),
    Key("tables.include", "list of db.table patterns", ("*.*",),
        Declared("tables maintained (fnmatch patterns, or one comma-separated string)")),
    Key("tables.exclude", "list of db.table patterns", (),
        Declared("tables left alone among those included")),
    Key("limits.concurrency", int, 2, Declared("table runs at once", minimum=1),
        attr="concurrency"),
    Key("limits.per_table", int, 1,
        Declared("jobs at once on one table (one is the only mode)", minimum=1)),
    Key("limits.memory_budget_mb", int, 1024,
        Declared("memory compaction tasks may use at once, all tables", minimum=64),
        attr="memory_budget_mb"),
    Key("http.host", str, "127.0.0.1", Declared("address the HTTP server binds"),
        attr="http_host"),
    Key("http.port", int, 9181, Declared("port the HTTP server binds", minimum=0, maximum=65535),
        attr="http_port"),
    Key("http.trigger_token_file", "path", None,
        Declared("a file holding the token the trigger API asks for (PAIMOND_TRIGGER_TOKEN "
                 "wins)")),
    Key("http.console_auth", bool, False,
        Declared("the read endpoints (/status, the console's /api/v1/*) ask for the trigger "
                 "token too; the console's page then asks for it"),
        attr="console_auth"),
    Key("log.format", str, "auto", Declared("log line format; auto: console on a terminal",
                                            choices=("auto", "json", "console")),
        attr="log_format"),
    Key("log.level", str, "info",
        Declared("lowest level logged", choices=("debug", "info", "warning", "error")),
        attr="log_level"),
    Key("lease.ttl_s", float, 120.0,
        Declared("seconds a table's lease lasts without renewal", minimum=5),
        attr="lease_ttl_s"),
    Key("shutdown.grace_s", float, 30.0,
        Declared("seconds running jobs get to finish at shutdown", minimum=0), attr="grace_s"),
    Key("daemon.check_interval_s", float, 10.0,
        Declared("seconds between two checks of which jobs are due", minimum=0.1),
        attr="check_interval_s"),
    Key("daemon.idle_check_interval_s", float, 60.0,
        Declared("seconds between two checks of a table that has not moved for as long "
                 "(at most check_interval_s: every check)", minimum=0),
        attr="idle_check_interval_s"),
    Key("daemon.discovery_interval_s", float, 60.0,
        Declared("seconds between two listings of the warehouses' tables (a known table's "
                 "branches: at most every 300 s)", minimum=0.1),
        attr="discovery_interval_s"),
    Key("daemon.backoff_base_s", float, 30.0,
        Declared("seconds a failed table waits first (doubling per failure)", minimum=0),
        attr="backoff_base_s"),
    Key("daemon.backoff_max_s", float, 3600.0,
        Declared("the longest wait after failures", minimum=0), attr="backoff_max_s"),
    Key("daemon.quarantine_after", int, 5,
        Declared("failures in a row that quarantine a table", minimum=1),
        attr="quarantine_after"),
    Key("daemon.liveness_timeout_s", float, 300.0,
        Declared("/healthz fails once no scheduler tick has finished for this long",
                 minimum=1), attr="liveness_timeout_s"),
    Key("daemon.replica_id", "name without '/'", None,
        Declared("the daemon's stable identity (leases, job records); unset: env POD_NAME, "
                 "else the hostname")),
    Key("lookup_cache.directory", "path", None,
        Declared("a local directory caching deletion-vector lookups; unset: lookups read "
                 "the data files")),
    Key("lookup_cache.max_size_mb", int, 1024,
        Declared("the lookup cache's size", minimum=1), attr="lookup_cache_max_mb"),
)
# the sections PAIMOND_<SECTION>_<KEY> sets ([[warehouses]] is a list: PAIMOND_WAREHOUSE adds one)
_SECTIONS = tuple(dict.fromkeys(k.section for k in KEYS if k.section not in ("", "warehouses")))
_KEY = {k.name: k for k in KEYS}
# Variables read besides PAIMOND_<SECTION>_<KEY> and PAIMOND_JOBS_<JOB>_<KEY>
ENVIRONMENT = (
    ("PAIMOND_WAREHOUSE", "adds a warehouse URI (after the file's [[warehouses]])"),
    ("PAIMOND_EXECUTOR", "sets executor"),
    ("PAIMOND_TRIGGER_TOKEN", "the token the trigger API asks for (over "
                              "http.trigger_token_file)"),
    ("POD_NAME", "the replica id when daemon.replica_id is unset"),
)


def _check_keys(data: Mapping[str, Any]) -> None:
    """A misspelt key is an error, never silently ignored."""
    for section in _SECTIONS:
        values = data.get(section, {})
        if not isinstance(values, dict):
            raise ConfigError(section, "expected a table of settings")
        keys = sorted(k.leaf for k in KEYS if k.section == section)
        unknown = sorted(set(values) - set(keys))
        if unknown:
            raise ConfigError(f"{section}.{unknown[0]}", f"unknown key; known: {', '.join(keys)}")


def load_settings(path: str | None = None, env: Mapping[str, str] | None = None, *,
                  jobs: Sequence[DaemonJob]) -> Settings:
    """Settings from ``path`` (TOML, or YAML by extension) and ``env`` (default os.environ);
    ``jobs``: the registry's routine jobs, in their order (their ``[jobs.<name>]`` sections).

    Raises ConfigError naming the offending key."""
    env = os.environ if env is None else env
    data = _read_file(Path(path)) if path else {}
    origins = _apply_env(data, env, tuple(job.name for job in jobs))
    try:
        return _settings(data, env, jobs)
    except ConfigError as error:
        if error.key not in origins:
            raise
        raise ConfigError(origins[error.key], f"{error.reason} (sets {error.key})") from None


def _value(data: Mapping[str, Any], key: Key) -> Any:
    section = data.get(key.section, {}) if key.section else data
    return key.parse(section.get(key.leaf, key.default))


def _settings(data: dict[str, Any], env: Mapping[str, str], jobs: Sequence[DaemonJob]
              ) -> Settings:
    known = {"warehouses", "jobs", "executor", "policies", *_SECTIONS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(unknown[0], f"unknown section; known: {', '.join(sorted(known))}")
    _check_keys(data)
    tables, http = data.get("tables", {}), data.get("http", {})
    daemon, cache = data.get("daemon", {}), data.get("lookup_cache", {})
    if _value(data, _KEY["http.console_auth"]) and _token(http, env) is None:
        raise ConfigError("http.console_auth", "needs the trigger token (PAIMOND_TRIGGER_TOKEN "
                                               "or http.trigger_token_file)")
    if _value(data, _KEY["limits.per_table"]) != 1:
        raise ConfigError("limits.per_table", "one job per table at a time is the only mode")
    return Settings(
        warehouses=_warehouses(data.get("warehouses"), env),
        include=_patterns(tables.get("include", list(_KEY["tables.include"].default)),
                          "tables.include"),
        exclude=_patterns(tables.get("exclude", list(_KEY["tables.exclude"].default)),
                          "tables.exclude"),
        jobs=parse_jobs(data.get("jobs", {}), jobs),
        trigger_token=_token(http, env),
        lookup_cache_dir=str(cache["directory"]) if cache.get("directory") else None,
        replica_id=_replica_id(daemon, env),
        policies=parse_policies(data.get("policies"), data.get("jobs", {}), jobs),
        **{k.attr: _value(data, k) for k in KEYS if k.attr is not None},
    )


def _replica_id(daemon: Mapping[str, Any], env: Mapping[str, str]) -> str:
    value = str(daemon.get("replica_id") or env.get("POD_NAME") or socket.gethostname()).strip()
    if not value or "/" in value:
        raise ConfigError("daemon.replica_id", f"{value!r}: expected a non-empty name without '/'")
    return value
