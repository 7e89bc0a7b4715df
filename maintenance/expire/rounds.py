"""Snapshot expiry that keeps up with ingestion: the expire job's rounds.

Java expires after every commit, each time at most ``snapshot.expire.limit`` snapshots, so a
table whose writers commit keeps within its retention. The daemon and the CLI expire once per
interval instead; one bounded expiration per run would leave the table further behind at each
interval under continuous ingestion. So a run expires in further bounded rounds while the
previous round was cut by the limit (bound ``expire-limit``: the table is still beyond its
retention), at most :data:`MAX_ROUNDS` rounds, calling ``progress`` between rounds (which may
raise to abandon the run: every finished round is complete on its own). The result is what
as many expiries one after the other give, as Java's per-commit expiries do.

A dry run plans one round: later rounds depend on the first one's deletions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from paimond.maintenance.expire.references import FileTally
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireResult

MAX_ROUNDS = 100  # per run; the next run goes on where this one stopped


@dataclass
class ExpireRounds:
    """The rounds of one expire run, in order (at least one)."""

    rounds: list[ExpireResult] = field(default_factory=list)
    capped: bool = False  # stopped at MAX_ROUNDS with the limit still cutting

    @property
    def last(self) -> ExpireResult:
        return self.rounds[-1]

    @property
    def expired_snapshots(self) -> int:
        return sum(r.work.snapshot_count for r in self.rounds if r.work is not None)

    @property
    def deleted(self) -> FileTally:
        total = FileTally()
        for result in self.rounds:
            total.files.update(result.deleted.files)
            total.size_bytes.update(result.deleted.size_bytes)
        return total

    def quiet_until_ms(self) -> float | None:
        """:meth:`ExpireResult.quiet_until_ms` of a run of one round (more: it expired)."""
        return self.last.quiet_until_ms() if len(self.rounds) == 1 else None

    def describe(self) -> str:
        if len(self.rounds) == 1:
            return self.last.describe()
        deleted = self.deleted
        name = self.last.plan.table_name
        done = [r.work for r in self.rounds if r.work is not None and r.work.begin_id is not None]
        span = f" {done[0].begin_id}..{done[-1].end_id - 1}" if done else ""
        # the total first: a log line or an event takes the first line
        lines = [f"{name}: expired snapshots{span} ({self.expired_snapshots}) in "
                 f"{len(self.rounds)} rounds (snapshot.expire.limit per round), deleted "
                 f"{deleted.total_files} files, {deleted.total_bytes:,} bytes"]
        lines += [r.describe() for r in self.rounds]
        if self.capped:
            lines.append(f"{name}: stopped after {MAX_ROUNDS} rounds with snapshots beyond "
                         "retention left; the next run goes on")
        return "\n".join(lines)


def cut_by_limit(result: ExpireResult) -> bool:
    """The round expired snapshots and stopped at the limit: more are beyond retention."""
    return result.plan.expires and result.plan.bound == "expire-limit"


def expire_in_rounds(job: ExpireJob, progress: Callable[..., None] | None = None,
                     max_rounds: int | None = None) -> ExpireRounds:
    """Run ``job`` until a round is not cut by the limit, at most ``max_rounds`` (default
    :data:`MAX_ROUNDS`) rounds; ``progress(done, total, label)`` between rounds."""
    cap = MAX_ROUNDS if max_rounds is None else max_rounds
    out = ExpireRounds([job.run()])
    while not job.dry_run and cut_by_limit(out.last):
        if len(out.rounds) >= cap:
            out.capped = True
            break
        if progress is not None:
            progress(len(out.rounds), cap, "expire rounds")
        out.rounds.append(job.run())
    return out
