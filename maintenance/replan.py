"""Plan -> execute -> commit, re-planned on a commit conflict: the loop every committing job
shares (Java's commit retry, with the plan redone from the latest snapshot each time, since a
concurrent commit may have removed what the old plan read)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from paimond.errors import CommitConflictError
from paimond.format.meta.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Attempt:
    """One planned and executed attempt. ``commit`` None: nothing to commit (nothing to do,
    or a dry run). ``discard`` removes what the attempt wrote, once its commit conflicted."""

    commit: Callable[[], Snapshot] | None = None
    discard: Callable[[], None] | None = None


def commit_with_replan(attempt: Callable[[int], Attempt], max_attempts: int
                       ) -> tuple[Snapshot | None, int]:
    """Runs ``attempt(1)``, ``attempt(2)``... until one commits or has nothing to commit;
    returns the snapshot (None: nothing committed) and the attempts made. Raises
    CommitConflictError when the last attempt's commit conflicted too."""
    for number in range(1, max_attempts + 1):
        current = attempt(number)
        if current.commit is None:
            return None, number
        try:
            return current.commit(), number
        except CommitConflictError:
            if current.discard is not None:
                current.discard()
            if number == max_attempts:
                raise
    raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
