"""APScheduler 3.x drives the service: one interval job calls ``Service.tick`` (which
discovers tables, decides and submits work); ``max_instances=1`` and ``coalesce`` so a slow
tick is never run twice at once or replayed."""

from __future__ import annotations

import datetime

from apscheduler.schedulers.background import BackgroundScheduler

from paimond.daemon.service import Service


def start_scheduler(service: Service, interval_s: float) -> BackgroundScheduler:
    scheduler = BackgroundScheduler(daemon=True)
    scheduler.add_job(service.tick, "interval", seconds=interval_s, id="tick",
                      max_instances=1, coalesce=True,
                      next_run_time=datetime.datetime.now(datetime.timezone.utc))
    scheduler.start()
    return scheduler
