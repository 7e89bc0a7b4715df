"""SIGTERM and SIGINT as stop requests (uvicorn's ``capture_signals``, without re-raising)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType


@contextlib.contextmanager
def stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Inside, SIGTERM and SIGINT call ``stop`` (which must only record the request); the
    previous handlers come back after. Only the main thread can install handlers: elsewhere
    (tests running the daemon in a thread) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {signum: signal.getsignal(signum) for signum in signals}

    def handle(signum: int, frame: FrameType | None) -> None:
        stop()

    for signum in signals:
        signal.signal(signum, handle)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
