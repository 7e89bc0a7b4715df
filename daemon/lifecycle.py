"""The daemon's lifecycle (uvicorn's ``Server`` holding its ``Config``): a :class:`Lifecycle`
holds a :class:`Daemon`; :meth:`Lifecycle.run` serves HTTP, schedules the daemon's ticks and
blocks until :meth:`Lifecycle.stop`, which a signal handler may call: it only records the
request. Shutdown then stops scheduling, lets running jobs (and so a running commit) finish
within the grace period, and cancels what remains; a second stop request ends the wait at once.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from paimond.daemon import heap
from paimond.daemon.http.control import Control
from paimond.daemon.http.endpoints import HttpServer
from paimond.daemon.logging import get_logger
from paimond.daemon.scheduler import start_scheduler
from paimond.daemon.service import Daemon
from paimond.daemon.signals import stop_on_signals
from paimond.daemon.tables import pace

log = get_logger(__name__)

STOP, IDLE = "stop", "idle"  # requests: stop, or a shutdown's last running job ended


class Lifecycle:
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.forced = False  # the last shutdown was cut short by a second stop request
        self._requests: queue.SimpleQueue[str] = queue.SimpleQueue()  # reentrant: signal-safe

    def run(self, on_serving: Callable[[str], None] | None = None) -> bool:
        """Serve HTTP and tick until :meth:`stop` (SIGTERM/SIGINT in the main thread), then
        shut down. True if every running job finished within the grace period. Raises
        ConfigError when a warehouse does not exist or the HTTP address cannot be bound.
        ``on_serving`` gets the base URL."""
        daemon, settings = self.daemon, self.daemon.settings
        daemon.check_warehouses()
        http = HttpServer(Control(daemon), daemon.metrics.registry, settings.http_host,
                          settings.http_port, settings.trigger_token,
                          read_auth=settings.console_auth)
        http.start()
        host, port = http.address
        url = f"http://{host}:{port}"
        log.info("daemon_started", metrics_url=f"{url}/metrics",
                 warehouses=[w.uri for w in settings.warehouses], owner=daemon.owner)
        if on_serving is not None:
            on_serving(url)
        try:
            with stop_on_signals(self.stop):
                self._serve()
                log.info("daemon_stopping", grace_s=settings.grace_s)
                clean = self.shutdown(settings.grace_s)
        finally:
            http.stop()
        log.info("daemon_stopped", clean=clean, forced=self.forced)
        return clean

    def _serve(self) -> None:
        """Tick and watch on the scheduler until a stop request."""
        daemon, interval_s = self.daemon, self.daemon.settings.check_interval_s
        daemon.keep_up = True
        scheduler = start_scheduler(daemon.tick, interval_s, daemon.clock, daemon.watch,
                                    pace.watch_interval_s(interval_s),
                                    heap.Settler(daemon.clock.monotonic_s))
        try:
            while self._requests.get() != STOP:
                pass  # an "idle" left from an earlier shutdown: not a request
        finally:
            scheduler.shutdown(wait=False)
            heap.release()

    @property
    def stopping(self) -> threading.Event:
        """Set once shutdown began: nothing new is scheduled."""
        return self.daemon.stopping

    def stop(self) -> None:
        """Ask the daemon to stop; asking again while it drains cuts the grace period short.
        Safe in a signal handler: it only queues the request."""
        self._requests.put(STOP)

    def shutdown(self, grace_s: float) -> bool:
        """Stop scheduling; wait up to ``grace_s`` for running jobs (or until a stop request),
        then cancel the rest. True if nothing was left running."""
        daemon = self.daemon
        daemon.stop_work(on_idle=lambda: self._requests.put(IDLE))
        deadline = daemon.clock.monotonic_s() + grace_s
        while True:
            with daemon.lock:
                if daemon.running_jobs == 0:
                    break
            remaining = deadline - daemon.clock.monotonic_s()
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
        return daemon.cancel()
