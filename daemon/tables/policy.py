"""Each table's effective policy and the daemon's runtime view of it: the ``[[policies]]``
entry that matches (``config/policy.py``) laid over ``[jobs]``, the table's own Paimon options
where Paimon defines the setting, pauses (from the config or through the API), the
full-compaction window, the concurrency share of a pattern, and what each job last did.

Pure but for the lock: the table's options and ``now`` are passed in. A pause made through the
API lives in memory only (the daemon keeps no local state): a restart forgets it, while
``paused = true`` in a policy stays.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paimond.config.jobs import JobsSettings
from paimond.config.policy import TablePolicy, window_text
from paimond.config.settings import Settings
from paimond.daemon.tables.evaluate import Schedule
from paimond.table.catalog import split_branch
from paimond.table.layout import MAIN_BRANCH

# Jobs over the files of the whole table, every branch's included: run for the main branch
# only, never once more per branch.
WHOLE_TABLE_JOBS = frozenset({"remove_orphans"})

# A policy's expire keys that Paimon defines as table options: a table setting the option
# keeps its own value (the policy is the default of the tables that do not).
PAIMON_OPTION_OF = {("expire", "retain_min"): "snapshot.num-retained.min",
                    ("expire", "retain_max"): "snapshot.num-retained.max",
                    ("expire", "older_than"): "snapshot.time-retained",
                    ("expire", "max_deletes"): "snapshot.expire.limit"}
_FIELD_OF = {"older_than": "older_than_ms"}
_DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What a job did the last time the daemon ran it on a table."""

    at: float  # wall seconds
    outcome: str  # success, conflict, skipped, failure
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Effective:
    """A table's settings for one run, with where each policy value came from."""

    jobs: JobsSettings
    sources: Mapping[str, str]  # "job.key" -> "policies[0] (...)" or the table option kept


def window_start(window: tuple[int, int], now_s: float) -> float | None:
    """The start (wall seconds) of the window ``now_s`` lies in, or None when outside it.
    A window may wrap midnight (``22:00-02:00``)."""
    start, end = window
    day = now_s - now_s % _DAY_S
    minute = (now_s - day) / 60
    if start < end:
        return day + start * 60 if start <= minute < end else None
    if minute >= start:
        return day + start * 60
    return day - _DAY_S + start * 60 if minute < end else None


def effective(settings: Settings, policy: TablePolicy | None,
              table_options: Mapping[str, str]) -> Effective:
    """``[jobs]``, then the policy, then the table's own Paimon options where they exist."""
    if policy is None:
        return Effective(settings.jobs, {})
    jobs, sources = policy.jobs, {}
    for job, key in sorted(policy.overrides):
        sources[f"{job}.{key}"] = policy.name
        option = PAIMON_OPTION_OF.get((job, key))
        if option is not None and option in table_options:
            name = _FIELD_OF.get(key, key)  # every such key is expire's
            kept = getattr(settings.jobs.by_name("expire").settings, name)  # [jobs], None: the option
            jobs = jobs.replace("expire", **{name: kept})
            sources[f"{job}.{key}"] = (f"table option {option}={table_options[option]} "
                                       f"(over {policy.name})")
    return Effective(jobs, sources)


class Policies:
    """The daemon's per-table policy state; thread-safe."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._paused: dict[str, str] = {}  # table -> why (API pauses)
        self._records: dict[str, dict[str, JobRecord]] = {}
        self._waiting: dict[str, str] = {}  # table -> why its due jobs were held back
        self._started: dict[str, float] = {}  # table -> wall seconds its last run was submitted
        self._last_full: dict[str, float] = {}  # table -> wall seconds of its last full compaction
        # the settings never change while the daemon runs: each table's policy and schedules
        # are worked out once (every check of every table asks for them)
        self._policies: dict[str, TablePolicy | None] = {}
        self._schedules: dict[str, dict[str, Schedule]] = {}

    # ---- what applies

    def policy(self, table: str) -> TablePolicy | None:
        """The first policy matching ``table``; for a branch (``db.t$branch_b``) that matches
        none, its table's."""
        try:
            return self._policies[table]
        except KeyError:
            policy = self.settings.policy(table)
            base, branch = split_branch(table)
            if policy is None and branch != MAIN_BRANCH:
                policy = self.settings.policy(base)
            self._policies[table] = policy
            return policy

    def jobs(self, table: str) -> JobsSettings:
        policy = self.policy(table)
        return self.settings.jobs if policy is None else policy.jobs

    def schedules(self, table: str) -> dict[str, Schedule]:
        cached = self._schedules.get(table)
        if cached is None:
            jobs = self.jobs(table)
            cached = self._schedules[table] = {
                name: Schedule(jobs.by_name(name).enabled and not (
                    name in WHOLE_TABLE_JOBS and split_branch(table)[1] != MAIN_BRANCH),
                    jobs.by_name(name).interval_s)
                for name in jobs.names}
        return dict(cached)

    def enabled_jobs(self, table: str) -> tuple[str, ...]:
        return tuple(name for name, s in self.schedules(table).items() if s.enabled)

    def for_run(self, table: str, table_options: Mapping[str, str], now_s: float) -> Effective:
        """The settings of a run starting at ``now_s``: compaction is full inside the
        policy's window until one full compaction ran in it."""
        policy = self.policy(table)
        chosen = effective(self.settings, policy, table_options)
        if policy is not None and policy.full_compaction_window is not None:
            start = window_start(policy.full_compaction_window, now_s)
            with self._lock:
                last = self._last_full.get(table)
            if start is not None and (last is None or last < start):
                jobs = chosen.jobs.replace("compact", full=True)
                sources = {**chosen.sources, "compact.full": f"{policy.name}: in the window "
                           f"{window_text(policy.full_compaction_window)} UTC"}
                chosen = Effective(jobs, sources)
        return chosen

    # ---- pauses

    def paused(self, table: str) -> str | None:
        """Why ``table`` gets no job, or None."""
        policy = self.policy(table)
        if policy is not None and policy.paused:
            return f"paused by {policy.name}"
        with self._lock:
            return self._paused.get(table)

    def pause(self, table: str, why: str) -> None:
        with self._lock:
            self._paused[table] = why

    def resume(self, table: str) -> str | None:
        """Lift an API pause; the reason a config pause still holds, else None."""
        with self._lock:
            self._paused.pop(table, None)
        return self.paused(table)

    # ---- fair scheduling

    def admit(self, due: Sequence[str], running: Iterable[str]) -> list[str]:
        """Of the tables ``due`` (most urgent first), those that may start now: a policy with
        ``concurrency`` N lets at most N of its tables run at once, and gives free slots to
        those whose last run started longest ago, so a large table cannot keep the small ones
        of its pattern waiting. The order of ``due`` is kept; the others are noted waiting."""
        busy: dict[int, int] = {}
        for name in running:
            policy = self.policy(name)
            if policy is not None and policy.concurrency is not None:
                busy[policy.index] = busy.get(policy.index, 0) + 1
        with self._lock:
            started = dict(self._started)
        chosen: set[str] = set()
        by_policy: dict[int, list[str]] = {}
        for name in due:
            policy = self.policy(name)
            if policy is None or policy.concurrency is None:
                chosen.add(name)
            else:
                by_policy.setdefault(policy.index, []).append(name)
        held: dict[str, str] = {}
        for index, names in by_policy.items():
            policy = self.settings.policies[index]
            assert policy.concurrency is not None
            free = max(0, policy.concurrency - busy.get(index, 0))
            names.sort(key=lambda n: started.get(n, float("-inf")))  # stable: urgency next
            chosen.update(names[:free])
            for name in names[free:]:
                held[name] = (f"waiting: {policy.name} runs at most {policy.concurrency} "
                              "table(s) at once")
        with self._lock:
            for name in due:
                self._waiting.pop(name, None)
            self._waiting.update(held)
        return [name for name in due if name in chosen]

    def started(self, table: str, now_s: float) -> None:
        with self._lock:
            self._started[table] = now_s
            self._waiting.pop(table, None)

    def waiting(self, table: str) -> str | None:
        with self._lock:
            return self._waiting.get(table)

    # ---- what happened

    def record(self, table: str, jobs: Sequence[str], reports: Mapping[str, Any],
               error: str | None, now_s: float, full: bool) -> None:
        """A run ended: each job's outcome (``reports``: job -> JobOutcome); the first job
        without a report failed with ``error``."""
        with self._lock:
            records = self._records.setdefault(table, {})
            for job, report in reports.items():
                records[job] = JobRecord(now_s, report.outcome, report.detail)
                if job == "compact" and full and report.outcome == "success":
                    self._last_full[table] = now_s
            failed = next((j for j in jobs if j not in reports), None)
            if error is not None and failed is not None:
                records[failed] = JobRecord(now_s, "failure", error)

    def records(self, table: str) -> dict[str, JobRecord]:
        with self._lock:
            return dict(self._records.get(table, {}))

    def forget(self, tables: Iterable[str]) -> None:
        """Tables discovery no longer finds."""
        with self._lock:
            for name in tables:
                for store in (self._records, self._waiting, self._started, self._last_full):
                    store.pop(name, None)
                self._policies.pop(name, None)
                self._schedules.pop(name, None)
