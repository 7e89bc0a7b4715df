"""structlog setup: JSON lines when not on a terminal, key=value on a terminal."""

from __future__ import annotations

import logging
import sys
from typing import TextIO, cast

import structlog


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
    """``log_format``: auto (console on a TTY, else JSON), json or console."""
    use_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if use_json
        else structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(
            getattr(logging, level.upper(), logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=cast(TextIO, _CurrentStderr())),
        cache_logger_on_first_use=False,
    )


class _CurrentStderr:
    """Whatever ``sys.stderr`` is when a line is written, not the stream it was at start-up
    (an embedding program or a test harness may replace, and close, the one it had)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]
