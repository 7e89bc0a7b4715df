"""Named crash points: every step that writes or deletes a table's files passes one, and a
test can make the process die there, as a SIGKILL would, to prove that every window between two
steps leaves the table readable and that a rerun finishes the job.

``PAIMOND_CRASH_AT=<point>[:<n>]`` (read once, at import) kills the process at the ``n``-th
time (default 1) it passes ``<point>``; unset, a crash point costs one comparison. A worker
process inherits the variable, so a point inside a bucket task crashes that worker.
``PAIMOND_CRASH_TRACE=<file>`` appends the name of every point passed to the file, one a line,
so a test can list the points a job passes and then crash it at each. Names are string
literals at the call sites (``crash_point("commit.snapshot_created")``), so a test can also
find every point by reading the source.
"""

from __future__ import annotations

import os

EXIT_CODE = 137  # what a shell reports for a process killed by SIGKILL


def _parse(spec: str) -> tuple[str, int] | None:
    if not spec:
        return None
    name, _, count = spec.partition(":")
    return name, int(count) if count else 1


_TARGET = _parse(os.environ.get("PAIMOND_CRASH_AT", ""))
_TRACE = os.environ.get("PAIMOND_CRASH_TRACE", "")
_passed: dict[str, int] = {}


def crash_point(name: str) -> None:
    """Die here if this is the configured point and its configured pass."""
    if _TRACE:
        with open(_TRACE, "a", encoding="utf-8") as trace:
            trace.write(name + "\n")
    if _TARGET is None or _TARGET[0] != name:
        return
    _passed[name] = _passed.get(name, 0) + 1
    if _passed[name] == _TARGET[1]:
        os._exit(EXIT_CODE)  # no cleanup, no flush: as abrupt as a kill


def passes_recorded() -> dict[str, int]:
    """How often each configured point was passed in this process (for tests)."""
    return dict(_passed)
