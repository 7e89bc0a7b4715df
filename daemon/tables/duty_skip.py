"""Skipping an unchanged table's periodic duties (expire, expire_consumers, expire_partitions,
merge_manifests, tags): the idle daemon at scale, where every table's duties fall due every
few minutes.

A duty that did nothing says until when a rerun would do nothing as long as the table's latest
snapshot and schema stay as they were (``JobReport.quiet_until_ms``): snapshot and changelog
expiry held by ``num-retained.min`` for ever, held by ``time-retained`` until the next one is
old enough; consumer expiry until the oldest consumer file is old enough; partition expiry for
ever while the table has no partitions, no expiration time or no snapshot; manifest merging
for ever; tags until the next tag's retention ends (automatic creation follows the snapshots
alone). Until then, at the same snapshot and schema, the duty is not run: its interval starts
again instead. Writers' commits and schema changes run it at the next check, as they start a
writer's own expiry in Paimon (which runs nothing at all while nobody commits).

What moves without a snapshot is bounded by :data:`compact_skip.SKIP_AT_MOST_S`: a consumer
advancing (expiry held by a consumer is never skipped), a tag created by hand, a killed job's
record to sweep. A failure, a trigger or a restart forgets every skip.
Pure: the service passes the reports, the schema and the wall time in.
"""

from __future__ import annotations

from collections.abc import Mapping

from paimond.daemon.outcomes import JobOutcome
from paimond.daemon.tables.compact_skip import SKIP_AT_MOST_S, Unchanged


def quiet_duties(reports: Mapping[str, JobOutcome], snapshot_id: int | None, schema_id: int,
                 started_s: float) -> dict[str, Unchanged]:
    """The duties of a run started at ``started_s`` (at ``snapshot_id`` and ``schema_id``)
    that are not run again before their ``until`` while both stay the same."""
    quiet = {}
    for job, report in reports.items():
        if job == "compact" or report.outcome != "success" or report.quiet_until_ms is None:
            continue
        until, why = started_s + SKIP_AT_MOST_S, f"at most {SKIP_AT_MOST_S:g} s"
        if report.quiet_until_ms / 1000 < until:
            until, why = report.quiet_until_ms / 1000, "what it keeps grows old enough"
        quiet[job] = Unchanged(snapshot_id, schema_id, started_s, until, why)
    return quiet


def skipped_duties(quiet: Mapping[str, Unchanged], jobs: tuple[str, ...], latest: int | None,
                   schema_id: int | None, now: float) -> tuple[str, ...]:
    """The due ``jobs`` whose quiet still holds at ``latest``, ``schema_id`` and ``now``."""
    return tuple(job for job in jobs
                 if (held := quiet.get(job)) is not None and held.holds(latest, schema_id, now))
