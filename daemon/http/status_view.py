"""``/status``: each table's state as JSON (``status_text`` renders it as text and HTML): the
effective policy, and per job the last run and its outcome, when it is next due, and why it
did or did not run. Pure: the service passes the figures and ``now`` in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from paimond.config.policy import TablePolicy, window_text
from paimond.daemon.tables.evaluate import REGENERATING, Schedule, Standing
from paimond.daemon.tables.policy import Effective, JobRecord

_NOTHING_LEFT = {
    "rewrite_index": "not due: every live file's index is as the file-index options say",
    "rebuild_dv": "not due: no bucket misses its deletion vectors"}


def _why(job: str, schedule: Schedule, standing: Standing, now: float, paused: str | None,
         waiting: str | None, source: str) -> tuple[str, float | None]:
    """(why the job runs or not, when it is next due in wall seconds or None)."""
    if not schedule.enabled:
        return f"disabled ({source})", None
    if paused is not None:
        return paused, None
    if standing.quarantined:
        return (f"quarantined after {standing.failures} failures; a new snapshot or a "
                "trigger clears it"), None
    if now < standing.next_attempt_at:
        return "backing off after a failure", standing.next_attempt_at
    if job in standing.refused:
        return "refused the table: due again once its schema or options change", None
    if job in REGENERATING and not standing.unsettled.get(job):
        return _NOTHING_LEFT[job], None
    if waiting is not None:
        return waiting, now
    last = standing.last_run.get(job)
    if job == "compact" and standing.last_snapshot_id != standing.compacted_snapshot_id:
        return "due: snapshots arrived since the last compaction", now
    if last is None:
        return "due: never ran in this process", now
    due_at = last + schedule.interval_s
    return ("due" if due_at <= now else f"next run after interval_s={schedule.interval_s:g}"), due_at


def policy_json(policy: TablePolicy | None, chosen: Effective, paused: str | None
                ) -> dict[str, Any]:
    return {
        "name": policy.name if policy else None,
        "paused": paused,
        "concurrency": policy.concurrency if policy else None,
        "full_compaction_window": (window_text(policy.full_compaction_window) + " UTC"
                                   if policy and policy.full_compaction_window else None),
        "max_compaction_debt_mb": policy.max_compaction_debt_mb if policy else None,
        "jobs": {job: chosen.jobs.by_name(job).as_dict() for job in chosen.jobs.names},
        "sources": dict(chosen.sources),
    }


def table_json(standing: Standing, *, running: bool, error: str | None, urgency: float,
               policy: TablePolicy | None, chosen: Effective, schedules: Mapping[str, Schedule],
               records: Mapping[str, JobRecord], paused: str | None, waiting: str | None,
               now: float, unchanged: str | None = None,
               figures: Mapping[str, float] | None = None) -> dict[str, Any]:
    """One table's entry; ``last_run`` and the top-level keys stay as before this page.
    ``unchanged``: why the periodic compaction is skipped (daemon.tables.compact_skip), if it is;
    ``figures``: the table's health figures as last read (its ``paimond_table_*`` gauges)."""
    jobs = {}
    for job in chosen.jobs.names:
        source = (policy.name if policy and (job, "enabled") in policy.overrides
                  else f"jobs.{job}.enabled")
        why, due = _why(job, schedules[job], standing, now, paused, waiting, source)
        if job == "compact" and unchanged is not None and why.startswith(("due", "next run")):
            why = f"{why}; {unchanged}"
        record = records.get(job)
        jobs[job] = {"last_run_at": record.at if record else standing.last_run.get(job),
                     "outcome": record.outcome if record else None,
                     "detail": record.detail if record else "",
                     "next_due_at": due, "why": "running now" if running else why}
    state = ("running" if running else "paused" if paused else "quarantined"
             if standing.quarantined else "backing off" if now < standing.next_attempt_at
             else "idle")
    return {"state": state, "quarantined": standing.quarantined, "failures": standing.failures,
            "error": error, "running": running, "paused": paused,
            "backoff_until": standing.next_attempt_at or None,
            "last_snapshot_id": standing.last_snapshot_id, "urgency": round(urgency, 6),
            "last_run": dict(standing.last_run), "jobs": jobs,
            # items no rebuild_dv / rewrite_index pass handled yet (buckets, files)
            "regeneration_left": {job: standing.unsettled.get(job, 0) for job in REGENERATING},
            "policy": policy_json(policy, chosen, paused),
            "figures": dict(figures or {})}


def summary_json(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What the console's overview shows of one ``table_json`` entry (a tenth of its size):
    the state, the error, the figures, and the jobs that refused the table."""
    refused = sorted(job for job, j in entry["jobs"].items() if j["why"].startswith("refused"))
    return {key: entry[key] for key in ("state", "error", "quarantined", "failures", "running",
                                        "paused", "figures")} | {"refused": refused}


# Table options that govern what paimond does to a table (and only those: a table's options
# may hold a storage's settings, which the console never shows).
MAINTENANCE_OPTION_PREFIXES = (
    "bucket", "write-only", "merge-engine", "changelog-producer", "deletion-vectors.",
    "num-sorted-run.", "num-levels", "compaction.", "full-compaction.", "target-file-size",
    "file.format", "file-index.", "snapshot.", "changelog.", "partition.expiration",
    "partition.timestamp", "tag.", "consumer.", "sequence.field", "record-level.",
    "lookup.", "sort-", "dynamic-bucket.")


def maintenance_options(options: Mapping[str, str]) -> dict[str, str]:
    """The table options among ``options`` that govern its maintenance, by key."""
    return {key: value for key, value in sorted(options.items())
            if key.startswith(MAINTENANCE_OPTION_PREFIXES)}
