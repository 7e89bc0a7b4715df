"""Per-table policy: ``[[policies]]`` sections that override the daemon's ``[jobs]`` settings
for the tables their patterns match, pause them, cap how many of them run at once, give
compaction a daily full-compaction window, and set the compaction debt a writer is held back
at (admission).

The first policy whose ``tables`` patterns match a table applies to it; a table no policy
matches follows ``[jobs]`` alone. A policy's ``[policies.jobs.<job>]`` sections take the keys
of ``[jobs.<job>]`` and are laid over them, so a policy names only what differs::

    [[policies]]
    tables = ["logs.*"]
    concurrency = 1                          # at most one logs.* table runs at once
    full_compaction_window = "01:00-04:00"   # UTC; one full compaction a day in it
    max_compaction_debt_mb = 512             # admission: writers wait above this
    [policies.jobs.expire]
    retain_max = 20                          # a table's own snapshot.* options still win

Where Paimon defines the option (``snapshot.num-retained.*``, ``snapshot.time-retained``,
``snapshot.expire.limit``) a table that sets it keeps its own value; the daemon applies that
precedence (``daemon/tables/policy.py``), which needs the table's options, read there.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paimond.config.declare import Declared, Key
from paimond.config.jobs import DaemonJob, JobsSettings, check_jobs, parse_jobs
from paimond.errors import ConfigError

POLICY_KEYS = (
    Key("tables", "list of db.table patterns", None,
        Declared("the tables the policy applies to (fnmatch patterns; required)")),
    Key("paused", bool, False, Declared("no job runs on the policy's tables")),
    Key("concurrency", int, None,
        Declared("table runs of the policy's tables at once; unset: no cap", minimum=1)),
    Key("full_compaction_window", "UTC window 'HH:MM-HH:MM'", None,
        Declared("one full compaction a day starts inside this window (may wrap midnight)")),
    Key("max_compaction_debt_mb", int, None,
        Declared("admission holds writers of the policy's tables back above this compaction "
                 "debt", minimum=0)),
    Key("jobs", "table of [jobs.<name>] sections", None,
        Declared("the keys of [jobs.<name>], laid over [jobs] for the policy's tables")),
)
_POLICY_KEY = {k.name: k for k in POLICY_KEYS}
_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


@dataclass(frozen=True, slots=True)
class TablePolicy:
    """One ``[[policies]]`` entry, its job sections already laid over ``[jobs]``."""

    index: int  # its place in the file: policies[index]
    tables: tuple[str, ...]  # db.table patterns (fnmatch)
    jobs: JobsSettings
    overrides: frozenset[tuple[str, str]]  # (job, key) pairs the policy itself sets
    paused: bool = False
    concurrency: int | None = None  # table runs of its tables at once; None: no cap
    full_compaction_window: tuple[int, int] | None = None  # UTC minutes of the day [start, end)
    max_compaction_debt_mb: int | None = None  # admission holds writers back above it

    @property
    def name(self) -> str:
        return f"policies[{self.index}] ({', '.join(self.tables)})"

    def matches(self, table_name: str) -> bool:
        return any(fnmatch.fnmatchcase(table_name, p) for p in self.tables)


def window_text(window: tuple[int, int]) -> str:
    start, end = window
    return f"{start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d}"


def _window(raw: Any, key: str) -> tuple[int, int]:
    match = _WINDOW.match(raw) if isinstance(raw, str) else None
    if match is None:
        raise ConfigError(key, f"expected a UTC window such as '01:00-04:00', got {raw!r}")
    h1, m1, h2, m2 = (int(g) for g in match.groups())
    if h1 > 23 or h2 > 24 or m1 > 59 or m2 > 59 or (h2 == 24 and m2):
        raise ConfigError(key, f"{raw!r} is not a time of day")
    start, end = h1 * 60 + m1, h2 * 60 + m2
    if start == end:
        raise ConfigError(key, f"{raw!r} is an empty window")
    return start, end


def _policy(index: int, raw: Any, jobs_raw: Mapping[str, Any], jobs: Sequence[DaemonJob]
            ) -> TablePolicy:
    key = f"policies[{index}]"
    if not isinstance(raw, dict):
        raise ConfigError(key, "expected a table of settings")
    unknown = sorted(set(raw) - set(_POLICY_KEY))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}",
                          f"unknown key; known: {', '.join(sorted(_POLICY_KEY))}")
    tables = raw.get("tables")
    if isinstance(tables, str):
        tables = [tables]
    if not isinstance(tables, list) or not tables or not all(isinstance(p, str) and p
                                                                for p in tables):
        raise ConfigError(f"{key}.tables", "expected a non-empty list of db.table patterns")
    own = check_jobs(raw.get("jobs", {}), jobs, f"{key}.jobs")
    merged = {job.name: {**jobs_raw.get(job.name, {}), **own.get(job.name, {})} for job in jobs}
    try:
        settings = parse_jobs(merged, jobs)
    except ConfigError as error:  # [jobs] parsed before: the policy's value is at fault
        raise ConfigError(f"{key}.{error.key}", error.reason) from None
    concurrency = raw.get("concurrency")
    debt = raw.get("max_compaction_debt_mb")
    window = raw.get("full_compaction_window")
    return TablePolicy(
        index=index, tables=tuple(tables), jobs=settings,
        overrides=frozenset((job, k) for job, section in own.items() for k in section),
        paused=_POLICY_KEY["paused"].parse(raw.get("paused", False), f"{key}.paused"),
        concurrency=None if concurrency is None else _POLICY_KEY["concurrency"].parse(
            concurrency, f"{key}.concurrency"),
        full_compaction_window=None if window is None else _window(
            window, f"{key}.full_compaction_window"),
        max_compaction_debt_mb=None if debt is None else _POLICY_KEY[
            "max_compaction_debt_mb"].parse(debt, f"{key}.max_compaction_debt_mb"))


def parse_policies(raw: Any, jobs_raw: Any, jobs: Sequence[DaemonJob]) -> tuple[TablePolicy, ...]:
    """The ``[[policies]]`` list; ``jobs_raw`` is the ``[jobs]`` table they are laid over
    (already validated), ``jobs`` the registry's. ConfigError names ``policies[i].key``."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("policies", "expected a list of policies ([[policies]])")
    jobs_raw = jobs_raw if isinstance(jobs_raw, dict) else {}
    return tuple(_policy(i, item, jobs_raw, jobs) for i, item in enumerate(raw))


def policy_for(policies: tuple[TablePolicy, ...], table_name: str) -> TablePolicy | None:
    """The first policy matching ``db.table``, or None."""
    return next((p for p in policies if p.matches(table_name)), None)
