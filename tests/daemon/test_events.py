"""Job events: a subscriber's failure is logged once and never reaches the emitting job."""

from __future__ import annotations

from structlog.testing import capture_logs

from paimond.daemon.events import Events, JobStarted


def test_a_failing_subscriber_is_logged_and_the_others_still_run() -> None:
    seen: list[object] = []

    def broken(event: object) -> None:
        raise RuntimeError("observer bug")

    events = Events(broken, seen.append)
    started = JobStarted("db.t", "compact", "job-1")
    with capture_logs() as logs:
        events.emit(started)  # must not raise
    assert seen == [started]
    (failure,) = [e for e in logs if e["event"] == "event_subscriber_failed"]
    assert failure["event_type"] == "JobStarted" and "broken" in failure["subscriber"]
