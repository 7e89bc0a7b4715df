"""The daemon's heap settling (daemon/heap.py): survivors frozen out of the cyclic collector's
traversals, dead cycles still freed at the next settle, and the scheduler running it."""

from __future__ import annotations

import datetime
import gc
import weakref
from collections.abc import Iterator

import pytest

from paimond.clock import Clock
from paimond.daemon import heap
from paimond.daemon.scheduler import start_scheduler


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def plain_gc() -> Iterator[None]:
    """Whatever a test froze is unfrozen after it."""
    yield
    heap.release()


@pytest.mark.usefixtures("plain_gc")
def test_settle_frees_dead_cycles_and_freezes_the_living() -> None:
    dead_before = Node()
    gone_before = weakref.ref(dead_before)
    del dead_before
    alive = Node()

    settled = heap.settle()

    assert gone_before() is None  # the full collection freed the cycle that was garbage
    assert settled.collected >= 1
    assert settled.frozen > 0 and gc.get_freeze_count() > 0  # (frozen objects may still be freed)
    assert not any(obj is alive for obj in gc.get_objects())  # frozen: no generation holds it

    held = weakref.ref(alive)
    del alive
    gc.collect()  # what the collector runs between settles never traverses frozen objects
    assert held() is not None

    heap.settle()  # the next settle takes the frozen objects back in first
    assert held() is None


@pytest.mark.usefixtures("plain_gc")
def test_release_unfreezes() -> None:
    heap.settle()
    assert gc.get_freeze_count() > 0
    heap.release()
    assert gc.get_freeze_count() == 0


def test_settles_a_minute_after_the_start_then_at_doubling_gaps_up_to_sixteen_minutes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    settles: list[float] = []

    def settle() -> heap.Settled:
        settles.append(now[0])
        return heap.Settled(0, 0, 0.0)

    monkeypatch.setattr(heap, "settle", settle)
    settler = heap.Settler(lambda: now[0])
    for second in range(0, 4000, 60):  # the scheduler calls it every minute
        now[0] = 1000.0 + second
        settler()
    assert [s - 1000 for s in settles] == [60, 180, 420, 900, 1860, 2820, 3780]


def test_the_scheduler_asks_the_settler_every_minute() -> None:
    scheduler = start_scheduler(lambda: None, 10.0, Clock(fixed_ms=1_800_000_000_000),
                                settle=lambda: None)
    try:
        job = scheduler.get_job("settle")
        assert job is not None
        assert job.trigger.interval == datetime.timedelta(seconds=heap.FIRST_SETTLE_S) == \
            datetime.timedelta(minutes=1)
    finally:
        scheduler.shutdown(wait=False)
