"""structlog setup: JSON lines when not on a terminal, key=value on a terminal. The standard
library's loggers (APScheduler's, say) go through the same renderer, so every line the process
writes is one JSON object."""

from __future__ import annotations

import logging
import sys
from typing import TextIO, cast

import structlog


def configure_logging(log_format: str = "auto", level: str = "info") -> bool:
    """``log_format``: auto (console on a TTY, else JSON), json or console. True if the lines
    are JSON."""
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
    handler = logging.StreamHandler(cast(TextIO, _CurrentStderr()))
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info, renderer],
        foreign_pre_chain=[structlog.stdlib.add_logger_name, structlog.processors.add_log_level,
                           structlog.processors.TimeStamper(fmt="iso", utc=True)]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    # third-party libraries' info lines (APScheduler's "Added job") are noise here
    root.setLevel(max(logging.WARNING, getattr(logging, level.upper(), logging.INFO)))
    return use_json


def silence_logging() -> None:
    """Write no line more (the process is about to leave; ``daemon_stopped`` was the last)."""
    _CurrentStderr.silent = True


class _CurrentStderr:
    """Whatever ``sys.stderr`` is when a line is written, not the stream it was at start-up
    (an embedding program or a test harness may replace, and close, the one it had)."""

    silent = False

    def write(self, text: str) -> int:
        return 0 if _CurrentStderr.silent else sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    return structlog.get_logger(name)  # type: ignore[no-any-return]
