"""APScheduler 3.x drives the daemon: one interval job calls ``Daemon.tick`` (which discovers
tables, decides and submits work), a faster one ``Daemon.watch`` (tables near their compaction
trigger, ``daemon.tables.pace``), a slow one settles the heap (``daemon.heap``);
``max_instances=1`` and ``coalesce`` so a slow tick is never run twice at once or replayed."""

from __future__ import annotations

import datetime
from collections.abc import Callable

from apscheduler.schedulers.background import BackgroundScheduler

from paimond.clock import Clock
from paimond.daemon import heap


def start_scheduler(tick: Callable[[], object], interval_s: float, clock: Clock,
                    watch: Callable[[], object] | None = None,
                    watch_interval_s: float = 1.0,
                    settle: Callable[[], object] | None = None) -> BackgroundScheduler:
    """The first tick runs at once (the clock's wall time; never dropped as misfired, even
    from an injected clock behind the system's), then every ``interval_s``; ``settle`` every
    :data:`heap.FIRST_SETTLE_S` (a :class:`heap.Settler` decides when to settle)."""
    scheduler = BackgroundScheduler(daemon=True)
    first = datetime.datetime.fromtimestamp(clock.wall_ms() / 1000, datetime.timezone.utc)
    scheduler.add_job(tick, "interval", seconds=interval_s, id="tick", max_instances=1,
                      coalesce=True, misfire_grace_time=None, next_run_time=first)
    if watch is not None:
        scheduler.add_job(watch, "interval", seconds=watch_interval_s, id="watch",
                          max_instances=1, coalesce=True, misfire_grace_time=None)
    if settle is not None:
        scheduler.add_job(settle, "interval", seconds=heap.FIRST_SETTLE_S, id="settle",
                          max_instances=1, coalesce=True, misfire_grace_time=None)
    scheduler.start()
    return scheduler
