"""The daemon's lifecycle (uvicorn's ``Server`` shape): :meth:`Lifecycle.run` serves HTTP,
schedules ticks and blocks until :meth:`Lifecycle.stop`, which a signal handler may call: it
only records the request. Shutdown then stops scheduling, lets running jobs (and so a running
commit) finish within the grace period, and cancels what remains; a second stop request ends
the wait at once. A part of ``Daemon`` (daemon/service.py).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, cast

from paimond.clock import Clock
from paimond.config.settings import Settings
from paimond.daemon import pace
from paimond.daemon.http import HttpServer
from paimond.daemon.logging import get_logger
from paimond.daemon.metrics import Metrics
from paimond.daemon.runner import TableRun
from paimond.daemon.scheduler import start_scheduler
from paimond.daemon.signals import stop_on_signals

if TYPE_CHECKING:
    from paimond.daemon.service import Daemon

log = get_logger(__name__)

STOP, IDLE = "stop", "idle"  # requests: stop, or a shutdown's last running job ended


class Lifecycle:
    if TYPE_CHECKING:  # Daemon's fields and methods
        settings: Settings
        metrics: Metrics
        clock: Clock
        owner: str
        forced: bool
        keep_up: bool
        running_jobs: int
        _lock: threading.Lock
        _pool: ThreadPoolExecutor
        _stopping: threading.Event
        _cancelled: threading.Event
        _requests: queue.SimpleQueue[str]

        def check_warehouses(self, *, unavailable_ok: bool = True) -> None: ...
        def tick(self) -> list[Future[TableRun]]: ...
        def watch(self) -> list[Future[TableRun]]: ...

    def run(self, on_serving: Callable[[str], None] | None = None) -> bool:
        """Serve HTTP and tick until :meth:`stop` (SIGTERM/SIGINT in the main thread), then
        shut down. True if every running job finished within the grace period. Raises
        ConfigError when a warehouse does not exist or the HTTP address cannot be bound.
        ``on_serving`` gets the base URL."""
        settings = self.settings
        self.check_warehouses()
        http = HttpServer(cast("Daemon", self), self.metrics.registry, settings.http_host,
                          settings.http_port, settings.trigger_token)
        http.start()
        host, port = http.address
        url = f"http://{host}:{port}"
        log.info("daemon_started", metrics_url=f"{url}/metrics",
                 warehouses=[w.uri for w in settings.warehouses], owner=self.owner)
        if on_serving is not None:
            on_serving(url)
        try:
            with stop_on_signals(self.stop):
                self.keep_up = True
                scheduler = start_scheduler(self.tick, settings.check_interval_s, self.clock,
                                            self.watch,
                                            pace.watch_interval_s(settings.check_interval_s))
                try:
                    while self._requests.get() != STOP:
                        pass  # an "idle" left from an earlier shutdown: not a request
                finally:
                    scheduler.shutdown(wait=False)
                log.info("daemon_stopping", grace_s=settings.grace_s)
                clean = self.shutdown(settings.grace_s)
        finally:
            http.stop()
        log.info("daemon_stopped", clean=clean, forced=self.forced)
        return clean

    @property
    def stopping(self) -> threading.Event:
        """Set once shutdown began: nothing new is scheduled."""
        return self._stopping

    def stop(self) -> None:
        """Ask the daemon to stop; asking again while it drains cuts the grace period short.
        Safe in a signal handler: it only queues the request."""
        self._requests.put(STOP)

    def shutdown(self, grace_s: float) -> bool:
        """Stop scheduling; wait up to ``grace_s`` for running jobs (or until a stop request),
        then cancel the rest. True if nothing was left running."""
        self._stopping.set()
        deadline = self.clock.monotonic_s() + grace_s
        while True:
            with self._lock:
                if self.running_jobs == 0:
                    break
            remaining = deadline - self.clock.monotonic_s()
            if remaining <= 0:
                break
            try:
                request = self._requests.get(timeout=remaining)
            except queue.Empty:
                break
            if request == STOP:
                self.forced = True
                log.warning("daemon_shutdown_forced")
                break
        self._cancelled.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            return self.running_jobs == 0
