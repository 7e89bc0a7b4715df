"""The ``[jobs.<name>]`` sections of the daemon's settings.

The jobs are not named here: the job registry (``maintenance/jobs.py``) is handed to the loader
(``load_settings(..., jobs=...)``), each job with its settings type, whose fields declared
``daemon=True`` (``config/declare.py``) are the section's keys besides ``enabled`` and
``interval_s`` (seconds between runs of the job on a table). A key the type does not declare
for the daemon is refused, so a misspelt setting never passes silently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from paimond.config.declare import Declared, DeclaredField, declared_fields, parse_section
from paimond.errors import ConfigError


class DaemonJob(Protocol):
    """A job of the registry as the loader sees it."""

    @property
    def name(self) -> str: ...

    @property
    def settings_type(self) -> type[Any]: ...

    @property
    def enabled(self) -> bool: ...  # the daemon runs it unless its section says otherwise

    @property
    def interval_s(self) -> float: ...  # the daemon's default seconds between runs


def schedule_fields(job: DaemonJob) -> tuple[DeclaredField, ...]:
    """``enabled`` and ``interval_s``, with the job's defaults."""
    return (DeclaredField("enabled", "enabled", bool, False, job.enabled,
                          Declared("whether the daemon runs the job")),
            DeclaredField("interval_s", "interval_s", float, False, job.interval_s,
                          Declared("seconds between two runs of the job on a table",
                                   minimum=1)))


def settable_fields(job: DaemonJob) -> tuple[DeclaredField, ...]:
    """The fields of the job's settings that its daemon section may set."""
    return tuple(f for f in declared_fields(job.settings_type) if f.declared.daemon)


def daemon_fields(job: DaemonJob) -> tuple[DeclaredField, ...]:
    """Every key of ``[jobs.<job>]``: the schedule, then the settings the daemon may set."""
    return schedule_fields(job) + settable_fields(job)


@dataclass(frozen=True, slots=True)
class JobSection:
    """One job's section: its schedule and its settings for the daemon's runs."""

    enabled: bool
    interval_s: float
    settings: Any  # the job's settings type: the daemon's defaults, then the section's keys
    daemon_keys: tuple[str, ...] = ()  # its fields a section may set

    def as_dict(self) -> dict[str, Any]:
        """The schedule and the settings a section may set, by field name."""
        return {"enabled": self.enabled, "interval_s": self.interval_s,
                **{name: getattr(self.settings, name) for name in self.daemon_keys}}

    def replace(self, **values: Any) -> JobSection:
        """This section with some settings replaced (by field name)."""
        return dataclasses.replace(self, settings=dataclasses.replace(self.settings, **values))


@dataclass(frozen=True, slots=True)
class JobsSettings:
    """Every job's section, in the routine's order."""

    sections: Mapping[str, JobSection]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.sections)

    def by_name(self, name: str) -> JobSection:
        return self.sections[name]

    def replace(self, name: str, **values: Any) -> JobsSettings:
        """These settings with job ``name``'s settings partly replaced."""
        return JobsSettings({**self.sections, name: self.sections[name].replace(**values)})


def job_keys(job: DaemonJob) -> tuple[str, ...]:
    return tuple(f.key for f in daemon_fields(job))


def parse_jobs(raw: Any, jobs: Sequence[DaemonJob], where: str = "jobs") -> JobsSettings:
    """The ``[jobs]`` table; raises ConfigError naming an unknown job or key, or a bad value."""
    names = [job.name for job in jobs]
    if not isinstance(raw, dict):
        raise ConfigError(where, "expected a table of jobs")
    unknown_jobs = sorted(set(raw) - set(names))
    if unknown_jobs:
        raise ConfigError(f"{where}.{unknown_jobs[0]}",
                          f"unknown job; jobs are {', '.join(names)}")
    sections = {}
    for job in jobs:
        section, key = raw.get(job.name, {}), f"{where}.{job.name}"
        if not isinstance(section, dict):
            raise ConfigError(key, "expected a table of settings")
        own_fields = settable_fields(job)
        values = parse_section(schedule_fields(job) + own_fields, section, key)
        own = {f.name: values.get(f.name, f.daemon_default) for f in own_fields}
        sections[job.name] = JobSection(
            enabled=values.get("enabled", job.enabled),
            interval_s=values.get("interval_s", job.interval_s),
            settings=job.settings_type(**own), daemon_keys=tuple(own))
    return JobsSettings(sections)


def check_jobs(raw: Any, jobs: Sequence[DaemonJob], where: str) -> dict[str, dict[str, Any]]:
    """A ``jobs`` table's names and keys only (values are checked once laid over ``[jobs]``)."""
    names = [job.name for job in jobs]
    if not isinstance(raw, dict):
        raise ConfigError(where, "expected a table of jobs")
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}", f"unknown job; jobs are {', '.join(names)}")
    for job in jobs:
        section = raw.get(job.name, {})
        if not isinstance(section, dict):
            raise ConfigError(f"{where}.{job.name}", "expected a table of settings")
        keys = job_keys(job)
        bad = sorted(set(section) - set(keys))
        if bad:
            raise ConfigError(f"{where}.{job.name}.{bad[0]}",
                              f"unknown key; known: {', '.join(sorted(keys))}")
    return raw
