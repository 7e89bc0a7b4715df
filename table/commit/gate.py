"""A stopping daemon's last word on commits: once it cancels, no job it runs publishes a
snapshot any more (a job committed after ``daemon_stopped``).

The runner runs each job under :func:`commits_cancelled_when` with its cancellation test;
the commit checks :func:`check_open` right before it creates the snapshot file, the one step
that makes a commit visible, and raises CommitCancelledError after that test turned true: the
job ends without committing and its recorded files are cleaned as any failed job's. The
predicate is carried in a context variable, so a CLI command or another daemon's job in the
same process is never affected.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from paimond.errors import CommitCancelledError

_CANCELLED: ContextVar[Callable[[], bool] | None] = ContextVar("commit_cancelled", default=None)


@contextmanager
def commits_cancelled_when(cancelled: Callable[[], bool]) -> Iterator[None]:
    """Commits made in this context are refused once ``cancelled()`` is true."""
    token = _CANCELLED.set(cancelled)
    try:
        yield
    finally:
        _CANCELLED.reset(token)


def check_open(what: str) -> None:
    """Raise CommitCancelledError if the context's commits were cancelled."""
    cancelled = _CANCELLED.get()
    if cancelled is not None and cancelled():
        raise CommitCancelledError(what)
