"""The daemon's settings: a TOML (or YAML) file overridden by ``PAIMOND_*`` environment
variables, validated into frozen dataclasses. Nothing is read at import time.

Every key can be overridden as ``PAIMOND_<SECTION>_<KEY>`` (``PAIMOND_HTTP_PORT=9200``,
``PAIMOND_JOBS_COMPACT_INTERVAL_S=30``); ``PAIMOND_WAREHOUSE`` adds a warehouse URI and
``PAIMOND_EXECUTOR`` sets ``executor``. An unknown section, job or key, in the file or in a
``PAIMOND_<SECTION>_...`` variable, is refused like a bad value: ConfigError names the key (or
the variable), and ``paimond run`` exits with code 2. Job sections are typed in ``jobs.py``.
Credentials never live in the file: the trigger token comes from ``PAIMOND_TRIGGER_TOKEN`` or
``http.trigger_token_file``, S3 credentials from the usual AWS variables or files.
"""

from __future__ import annotations

import fnmatch
import os
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from paimond.config.jobs import (
    JOB_NAMES,
    CompactJobSettings,
    ExpireJobSettings,
    JobSettings,
    JobsSettings,
    MergeManifestsJobSettings,
    RemoveOrphansJobSettings,
    parse_jobs,
)
from paimond.config.policy import TablePolicy, parse_policies, policy_for
from paimond.config.values import choice as _choice
from paimond.config.values import number as _number
from paimond.errors import ConfigError

__all__ = ["JOB_NAMES", "CompactJobSettings", "ExpireJobSettings", "JobSettings", "JobsSettings",
           "MergeManifestsJobSettings", "RemoveOrphansJobSettings", "Settings",
           "WarehouseSettings", "load_settings"]
_SECRET_KEYS = {"key", "secret", "token", "access_key_id", "secret_access_key", "session_token",
                "password"}


@dataclass(frozen=True, slots=True)
class WarehouseSettings:
    uri: str
    storage_options: Mapping[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = {k: ("***" if k in _SECRET_KEYS else v) for k, v in self.storage_options.items()}
        return f"WarehouseSettings(uri={self.uri!r}, storage_options={shown!r})"


@dataclass(frozen=True, slots=True)
class Settings:
    warehouses: tuple[WarehouseSettings, ...]
    include: tuple[str, ...] = ("*.*",)
    exclude: tuple[str, ...] = ()
    jobs: JobsSettings = field(default_factory=JobsSettings)
    concurrency: int = 2
    memory_budget_mb: int = 1024  # compaction tasks running at once, all tables (maintenance.memory)
    executor: str = "local"  # where the daemon's compaction tasks run: local, spark
    http_host: str = "127.0.0.1"
    http_port: int = 9181
    trigger_token: str | None = field(default=None, repr=False)
    log_format: str = "auto"
    log_level: str = "info"
    lease_ttl_s: float = 120.0
    grace_s: float = 30.0
    check_interval_s: float = 10.0
    # /healthz fails once no scheduler tick has finished for this long (a stuck scheduler)
    liveness_timeout_s: float = 300.0
    discovery_interval_s: float = 60.0
    backoff_base_s: float = 30.0
    backoff_max_s: float = 3600.0
    quarantine_after: int = 5
    lookup_cache_dir: str | None = None  # None: deletion-vector lookups read the data files
    lookup_cache_max_mb: int = 1024
    # The daemon's stable identity (leases, job records): a restarted daemon takes its own
    # lease back at once. ``daemon.replica_id``, else env ``POD_NAME``, else the hostname.
    replica_id: str = field(default_factory=socket.gethostname)
    policies: tuple[TablePolicy, ...] = ()  # [[policies]]: per-table overrides (config/policy.py)

    def wants(self, table_name: str) -> bool:
        """Whether ``db.table`` is maintained (include patterns, minus exclude patterns)."""
        return (any(fnmatch.fnmatchcase(table_name, p) for p in self.include)
                and not any(fnmatch.fnmatchcase(table_name, p) for p in self.exclude))

    def job(self, name: str) -> JobSettings:
        """The typed section of job ``name`` (one of JOB_NAMES)."""
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


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
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
            job = max((j for j in JOB_NAMES if rest.startswith(f"jobs_{j}_")), key=len,
                      default=None)
            if job is None:
                raise ConfigError(name, f"unknown job; jobs are {', '.join(JOB_NAMES)}")
            key = rest[len(f"jobs_{job}_"):]
            _table(_table(data, "jobs", "jobs"), job, f"jobs.{job}")[key] = value
            origins[f"jobs.{job}.{key}"] = name
        else:
            section = next((s for s in _SECTION_KEYS if rest.startswith(s + "_")), None)
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


def _warehouses(raw: Any) -> tuple[WarehouseSettings, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError("warehouses", "at least one warehouse is needed "
                                        "([[warehouses]] uri = ... or PAIMOND_WAREHOUSE)")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("uri"), str) or not item["uri"]:
            raise ConfigError(f"warehouses[{i}].uri", "a warehouse needs a uri")
        unknown = sorted(set(item) - {"uri", "storage_options"})
        if unknown:
            raise ConfigError(f"warehouses[{i}].{unknown[0]}",
                              "unknown key; known: storage_options, uri")
        options = item.get("storage_options", {})
        if not isinstance(options, dict):
            raise ConfigError(f"warehouses[{i}].storage_options", "expected a table of options")
        secrets = sorted(set(options) & _SECRET_KEYS)
        if secrets:
            raise ConfigError(f"warehouses[{i}].storage_options.{secrets[0]}",
                              "credentials do not belong in the config file; use the "
                              "environment (AWS_ACCESS_KEY_ID, ...) or credential files")
        out.append(WarehouseSettings(item["uri"], {str(k): str(v) for k, v in options.items()}))
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


_SECTION_KEYS = {
    "tables": {"include", "exclude"},
    "limits": {"concurrency", "per_table", "memory_budget_mb"},
    "http": {"host", "port", "trigger_token_file"},
    "log": {"format", "level"},
    "lease": {"ttl_s"},
    "shutdown": {"grace_s"},
    "daemon": {"check_interval_s", "discovery_interval_s", "backoff_base_s", "backoff_max_s",
               "quarantine_after", "replica_id", "liveness_timeout_s"},
    "lookup_cache": {"directory", "max_size_mb"},
}


def _check_keys(data: Mapping[str, Any]) -> None:
    """A misspelt key is an error, never silently ignored."""
    for section, keys in _SECTION_KEYS.items():
        values = data.get(section, {})
        if not isinstance(values, dict):
            raise ConfigError(section, "expected a table of settings")
        unknown = sorted(set(values) - keys)
        if unknown:
            raise ConfigError(f"{section}.{unknown[0]}",
                              f"unknown key; known: {', '.join(sorted(keys))}")


def load_settings(path: str | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``path`` (TOML, or YAML by extension) and ``env`` (default os.environ).

    Raises ConfigError naming the offending key."""
    env = os.environ if env is None else env
    data = _read_file(Path(path)) if path else {}
    origins = _apply_env(data, env)
    try:
        return _settings(data, env)
    except ConfigError as error:
        if error.key not in origins:
            raise
        raise ConfigError(origins[error.key], f"{error.reason} (sets {error.key})") from None


def _settings(data: dict[str, Any], env: Mapping[str, str]) -> Settings:
    known = {"warehouses", "tables", "jobs", "limits", "executor", "http", "log", "lease",
             "shutdown", "daemon", "lookup_cache", "policies"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(unknown[0], f"unknown section; known: {', '.join(sorted(known))}")
    _check_keys(data)
    tables, limits, http = data.get("tables", {}), data.get("limits", {}), data.get("http", {})
    log, daemon = data.get("log", {}), data.get("daemon", {})
    cache = data.get("lookup_cache", {})
    if _number(limits.get("per_table", 1), "limits.per_table", int, 1) != 1:
        raise ConfigError("limits.per_table", "one job per table at a time is the only mode")
    return Settings(
        warehouses=_warehouses(data.get("warehouses")),
        include=_patterns(tables.get("include", ["*.*"]), "tables.include"),
        exclude=_patterns(tables.get("exclude", []), "tables.exclude"),
        jobs=parse_jobs(data.get("jobs", {})),
        concurrency=_number(limits.get("concurrency", 2), "limits.concurrency", int, 1),
        memory_budget_mb=_number(limits.get("memory_budget_mb", 1024), "limits.memory_budget_mb",
                                 int, 64),
        executor=_choice(data.get("executor", "local"), "executor", ("local", "spark")),
        http_host=str(http.get("host", "127.0.0.1")),
        http_port=_number(http.get("port", 9181), "http.port", int, 0, 65535),
        trigger_token=_token(http, env),
        log_format=_choice(log.get("format", "auto"), "log.format", ("auto", "json", "console")),
        log_level=_choice(log.get("level", "info"), "log.level",
                          ("debug", "info", "warning", "error")),
        lease_ttl_s=_number(data.get("lease", {}).get("ttl_s", 120), "lease.ttl_s", float, 5),
        grace_s=_number(data.get("shutdown", {}).get("grace_s", 30), "shutdown.grace_s", float, 0),
        check_interval_s=_number(daemon.get("check_interval_s", 10), "daemon.check_interval_s",
                                 float, 0.1),
        liveness_timeout_s=_number(daemon.get("liveness_timeout_s", 300),
                                   "daemon.liveness_timeout_s", float, 1),
        discovery_interval_s=_number(daemon.get("discovery_interval_s", 60),
                                     "daemon.discovery_interval_s", float, 0.1),
        backoff_base_s=_number(daemon.get("backoff_base_s", 30), "daemon.backoff_base_s", float, 0),
        backoff_max_s=_number(daemon.get("backoff_max_s", 3600), "daemon.backoff_max_s", float, 0),
        quarantine_after=_number(daemon.get("quarantine_after", 5), "daemon.quarantine_after",
                                 int, 1),
        lookup_cache_dir=str(cache["directory"]) if cache.get("directory") else None,
        lookup_cache_max_mb=_number(cache.get("max_size_mb", 1024), "lookup_cache.max_size_mb",
                                    int, 1),
        replica_id=_replica_id(daemon, env),
        policies=parse_policies(data.get("policies"), data.get("jobs", {})),
    )


def _replica_id(daemon: Mapping[str, Any], env: Mapping[str, str]) -> str:
    value = str(daemon.get("replica_id") or env.get("POD_NAME") or socket.gethostname()).strip()
    if not value or "/" in value:
        raise ConfigError("daemon.replica_id", f"{value!r}: expected a non-empty name without '/'")
    return value
