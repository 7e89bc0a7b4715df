"""The ``[jobs.<name>]`` sections of the daemon's settings, one frozen type per job.

Every section has ``enabled`` and ``interval_s`` (seconds between runs of the job on a
table); the other keys override the table's own options for the daemon's runs. A key that is
not listed here is refused, so a misspelt setting never passes silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from paimond.config.values import duration_ms, flag, number
from paimond.errors import ConfigError

# The routine's order: partitions drop, tags and consumers settle before snapshots expire
# (a new tag then protects its snapshot, an expired consumer no longer pins any).
# Missing vectors first (readers are wrong until they exist); indexes after compaction has
# rewritten what it would.
JOB_NAMES = ("rebuild_dv", "compact", "rewrite_index", "expire_partitions", "tags",
             "expire_consumers", "expire", "merge_manifests", "remove_orphans")
# maintenance/expire/orphans.py MIN_WINDOW_MS: shorter windows need --force, which the daemon never uses.
ORPHAN_MIN_WINDOW_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class CompactJobSettings:
    enabled: bool = True
    interval_s: float = 60.0
    full: bool = False  # every bucket to one sorted run at the max level
    parallelism: int = 1  # bucket tasks at once


@dataclass(frozen=True, slots=True)
class ExpireJobSettings:
    """None keeps the table's option (named in the comment)."""

    enabled: bool = True
    interval_s: float = 300.0
    retain_min: int | None = None  # snapshot.num-retained.min
    retain_max: int | None = None  # snapshot.num-retained.max
    older_than_ms: int | None = None  # snapshot.time-retained; file key older_than
    max_deletes: int | None = None  # snapshot.expire.limit


@dataclass(frozen=True, slots=True)
class ExpirePartitionsJobSettings:
    """Drops what ``partition.expiration-*`` says; a table without it is left alone."""

    enabled: bool = True
    interval_s: float = 3600.0  # Java's partition.expiration-check-interval default


@dataclass(frozen=True, slots=True)
class TagsJobSettings:
    """Creates what ``tag.automatic-creation`` says, then expires tags."""

    enabled: bool = True
    interval_s: float = 300.0


@dataclass(frozen=True, slots=True)
class ExpireConsumersJobSettings:
    """Deletes consumers idle longer than ``consumer.expiration-time``."""

    enabled: bool = True
    interval_s: float = 600.0


@dataclass(frozen=True, slots=True)
class MergeManifestsJobSettings:
    enabled: bool = True
    interval_s: float = 600.0
    # by manifest.merge-min-count and the full-compaction size, as a writer's commit merges:
    # forcing would commit a COMPACT snapshot after nearly every writer commit
    forced: bool = False


@dataclass(frozen=True, slots=True)
class RemoveOrphansJobSettings:
    enabled: bool = False
    interval_s: float = 86400.0
    older_than_ms: int | None = None  # the safety window (file key older_than); None: 1 day


@dataclass(frozen=True, slots=True)
class RebuildDvJobSettings:
    """Due only while buckets of a deletion-vector table miss their vectors
    (maintenance/regenerate/pending.py); each pass rebuilds whole buckets up to ``max_files``."""

    enabled: bool = True
    interval_s: float = 10.0  # at least this long between two passes on a table
    max_files: int = 200  # level >= 1 files a pass reads (at least one bucket)


@dataclass(frozen=True, slots=True)
class RewriteIndexJobSettings:
    """Due only while live files' indexes differ from the ``file-index.*`` options; each pass
    re-indexes at most ``max_files`` of them."""

    enabled: bool = True
    interval_s: float = 10.0
    max_files: int = 100


JobSettings = (CompactJobSettings | ExpireJobSettings | MergeManifestsJobSettings
               | RemoveOrphansJobSettings | ExpirePartitionsJobSettings | TagsJobSettings
               | ExpireConsumersJobSettings | RebuildDvJobSettings | RewriteIndexJobSettings)


@dataclass(frozen=True, slots=True)
class JobsSettings:
    compact: CompactJobSettings = field(default_factory=CompactJobSettings)
    expire: ExpireJobSettings = field(default_factory=ExpireJobSettings)
    merge_manifests: MergeManifestsJobSettings = field(default_factory=MergeManifestsJobSettings)
    remove_orphans: RemoveOrphansJobSettings = field(default_factory=RemoveOrphansJobSettings)
    expire_partitions: ExpirePartitionsJobSettings = field(
        default_factory=ExpirePartitionsJobSettings)
    tags: TagsJobSettings = field(default_factory=TagsJobSettings)
    expire_consumers: ExpireConsumersJobSettings = field(
        default_factory=ExpireConsumersJobSettings)
    rebuild_dv: RebuildDvJobSettings = field(default_factory=RebuildDvJobSettings)
    rewrite_index: RewriteIndexJobSettings = field(default_factory=RewriteIndexJobSettings)

    def by_name(self, name: str) -> JobSettings:
        if name not in JOB_NAMES:
            raise KeyError(name)
        settings: JobSettings = getattr(self, name)
        return settings


def _count(section: Mapping[str, Any], name: str, key: str, minimum: int) -> int | None:
    return None if name not in section else number(section[name], f"{key}.{name}", int, minimum)


def _duration(section: Mapping[str, Any], key: str, minimum_ms: int = 0) -> int | None:
    raw = section.get("older_than")
    return None if raw is None else duration_ms(raw, f"{key}.older_than", minimum_ms)


def _compact(section: Mapping[str, Any], key: str) -> CompactJobSettings:
    default = CompactJobSettings()
    return CompactJobSettings(
        enabled=flag(section.get("enabled", default.enabled), f"{key}.enabled"),
        interval_s=number(section.get("interval_s", default.interval_s), f"{key}.interval_s",
                          float, 1),
        full=flag(section.get("full", default.full), f"{key}.full"),
        parallelism=number(section.get("parallelism", default.parallelism),
                           f"{key}.parallelism", int, 1))


def _expire(section: Mapping[str, Any], key: str) -> ExpireJobSettings:
    default = ExpireJobSettings()
    retain_min = _count(section, "retain_min", key, 1)
    retain_max = _count(section, "retain_max", key, 1)
    if retain_min is not None and retain_max is not None and retain_max < retain_min:
        raise ConfigError(f"{key}.retain_max",
                          f"must not be less than retain_min ({retain_min}), got {retain_max}")
    return ExpireJobSettings(
        enabled=flag(section.get("enabled", default.enabled), f"{key}.enabled"),
        interval_s=number(section.get("interval_s", default.interval_s), f"{key}.interval_s",
                          float, 1),
        retain_min=retain_min, retain_max=retain_max, older_than_ms=_duration(section, key),
        max_deletes=_count(section, "max_deletes", key, 1))


def _scheduled(settings_type: type[Any]) -> Callable[[Mapping[str, Any], str], Any]:
    """The parser of a section with only ``enabled`` and ``interval_s``."""
    def parse(section: Mapping[str, Any], key: str) -> Any:
        default = settings_type()
        return settings_type(
            enabled=flag(section.get("enabled", default.enabled), f"{key}.enabled"),
            interval_s=number(section.get("interval_s", default.interval_s),
                              f"{key}.interval_s", float, 1))
    return parse


def _merge_manifests(section: Mapping[str, Any], key: str) -> MergeManifestsJobSettings:
    default = MergeManifestsJobSettings()
    return MergeManifestsJobSettings(
        enabled=flag(section.get("enabled", default.enabled), f"{key}.enabled"),
        interval_s=number(section.get("interval_s", default.interval_s), f"{key}.interval_s",
                          float, 1),
        forced=flag(section.get("forced", default.forced), f"{key}.forced"))


def _remove_orphans(section: Mapping[str, Any], key: str) -> RemoveOrphansJobSettings:
    default = RemoveOrphansJobSettings()
    return RemoveOrphansJobSettings(
        enabled=flag(section.get("enabled", default.enabled), f"{key}.enabled"),
        interval_s=number(section.get("interval_s", default.interval_s), f"{key}.interval_s",
                          float, 1),
        older_than_ms=_duration(section, key, ORPHAN_MIN_WINDOW_MS))


def _bounded(settings_type: type[Any]) -> Callable[[Mapping[str, Any], str], Any]:
    """The parser of a regenerating job's section: ``max_files`` besides the schedule."""
    def parse(section: Mapping[str, Any], key: str) -> Any:
        default = settings_type()
        return settings_type(
            enabled=flag(section.get("enabled", default.enabled), f"{key}.enabled"),
            interval_s=number(section.get("interval_s", default.interval_s),
                              f"{key}.interval_s", float, 1),
            max_files=number(section.get("max_files", default.max_files), f"{key}.max_files",
                             int, 1))
    return parse


_PARSERS: dict[str, Callable[[Mapping[str, Any], str], Any]] = {
    "compact": _compact, "expire": _expire,
    "merge_manifests": _merge_manifests,
    "remove_orphans": _remove_orphans,
    "expire_partitions": _scheduled(ExpirePartitionsJobSettings),
    "tags": _scheduled(TagsJobSettings),
    "expire_consumers": _scheduled(ExpireConsumersJobSettings),
    "rebuild_dv": _bounded(RebuildDvJobSettings),
    "rewrite_index": _bounded(RewriteIndexJobSettings),
}
JOB_KEYS = {
    "compact": {"enabled", "interval_s", "full", "parallelism"},
    "expire": {"enabled", "interval_s", "retain_min", "retain_max", "older_than", "max_deletes"},
    "merge_manifests": {"enabled", "interval_s", "forced"},
    "remove_orphans": {"enabled", "interval_s", "older_than"},
    "expire_partitions": {"enabled", "interval_s"},
    "tags": {"enabled", "interval_s"},
    "expire_consumers": {"enabled", "interval_s"},
    "rebuild_dv": {"enabled", "interval_s", "max_files"},
    "rewrite_index": {"enabled", "interval_s", "max_files"},
}


def parse_jobs(raw: Any) -> JobsSettings:
    """The ``[jobs]`` table; raises ConfigError naming an unknown job or key, or a bad value."""
    if not isinstance(raw, dict):
        raise ConfigError("jobs", "expected a table of jobs")
    unknown_jobs = sorted(set(raw) - set(JOB_NAMES))
    if unknown_jobs:
        raise ConfigError(f"jobs.{unknown_jobs[0]}",
                          f"unknown job; jobs are {', '.join(JOB_NAMES)}")
    sections = {}
    for name in JOB_NAMES:
        section, key = raw.get(name, {}), f"jobs.{name}"
        if not isinstance(section, dict):
            raise ConfigError(key, "expected a table of settings")
        unknown = sorted(set(section) - JOB_KEYS[name])
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}",
                              f"unknown key; known: {', '.join(sorted(JOB_KEYS[name]))}")
        sections[name] = _PARSERS[name](section, key)
    return JobsSettings(**sections)
