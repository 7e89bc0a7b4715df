"""The shared plan -> execute -> commit loop: re-plans after a conflict, cleans each
conflicted attempt, stops when there is nothing to commit, gives up after the last attempt."""

from __future__ import annotations

from typing import Any

import pytest

from paimond.errors import CommitConflictError
from paimond.maintenance.replan import Attempt, commit_with_replan


def _attempts(outcomes: list[str], log: list[str]) -> Any:
    """outcomes[i] for attempt i + 1: 'commit', 'conflict' or 'nothing'."""

    def attempt(number: int) -> Attempt:
        outcome = outcomes[number - 1]
        log.append(f"plan {number}")
        if outcome == "nothing":
            return Attempt()

        def commit() -> Any:
            log.append(f"commit {number}")
            if outcome == "conflict":
                raise CommitConflictError("t", "RequireSnapshot", "the planned snapshot", f"attempt {number}")
            return f"snapshot of attempt {number}"

        return Attempt(commit, lambda: log.append(f"discard {number}"))

    return attempt


def test_a_conflict_is_cleaned_and_re_planned() -> None:
    log: list[str] = []
    snapshot, attempts = commit_with_replan(_attempts(["conflict", "commit"], log), 3)
    assert (snapshot, attempts) == ("snapshot of attempt 2", 2)
    assert log == ["plan 1", "commit 1", "discard 1", "plan 2", "commit 2"]


def test_nothing_to_commit_stops_without_committing() -> None:
    log: list[str] = []
    assert commit_with_replan(_attempts(["conflict", "nothing"], log), 3) == (None, 2)
    assert log == ["plan 1", "commit 1", "discard 1", "plan 2"]


def test_the_last_conflict_is_raised_after_cleaning() -> None:
    log: list[str] = []
    with pytest.raises(CommitConflictError, match="attempt 2"):
        commit_with_replan(_attempts(["conflict", "conflict", "commit"], log), 2)
    assert log == ["plan 1", "commit 1", "discard 1", "plan 2", "commit 2", "discard 2"]


def test_other_errors_are_not_retried() -> None:
    calls: list[int] = []

    def attempt(number: int) -> Attempt:
        calls.append(number)
        raise OSError("storage gone")

    with pytest.raises(OSError):
        commit_with_replan(attempt, 3)
    assert calls == [1]
