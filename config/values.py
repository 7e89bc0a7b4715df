"""Setting values from a file (TOML or YAML types) or the environment (always strings), each
checked into its Python type; every failure is a ConfigError naming the key.

Durations use Paimon's grammar (Java ``TimeUtils.parseDuration``, apache/paimon release-1.0):
``30 min``, ``1h``, ``500ms``, ``2 d``; a bare number is milliseconds. Table options are read
with the same grammar (both use ``paimond.durations``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from paimond.durations import duration_millis
from paimond.errors import ConfigError

N = TypeVar("N", int, float)

_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def number(raw: Any, key: str, kind: type[N], minimum: float,
           maximum: float | None = None) -> N:
    """An int or float at least ``minimum`` (and at most ``maximum``); an int setting
    refuses ``2.5``."""
    if isinstance(raw, bool) or (kind is int and isinstance(raw, float) and not raw.is_integer()):
        raise ConfigError(key, f"expected a {kind.__name__}, got {raw!r}")
    try:
        value = kind(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        raise ConfigError(key, f"expected a {kind.__name__}, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(key, f"must be a {kind.__name__} >= {minimum}, got {raw!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(key, f"must be a {kind.__name__} <= {maximum}, got {raw!r}")
    return value


def flag(raw: Any, key: str) -> bool:
    """A boolean, or one of true/false/1/0/yes/no in any case (the environment's spelling)."""
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in _TRUE or text in _FALSE:
        return text in _TRUE
    raise ConfigError(key, f"expected true or false (or 1/0, yes/no), got {raw!r}")


def names(raw: Any, key: str) -> tuple[str, ...]:
    """A list of non-empty strings (a file's array, or the environment's comma-separated)."""
    if isinstance(raw, str):
        raw = [p.strip() for p in raw.split(",") if p.strip()]
    if not isinstance(raw, list) or not all(isinstance(p, str) and p for p in raw):
        raise ConfigError(key, f"expected a list of strings, got {raw!r}")
    return tuple(raw)


def choice(raw: Any, key: str, choices: tuple[str, ...]) -> str:
    value = str(raw).strip().lower()
    if value not in choices:
        raise ConfigError(key, f"must be one of {', '.join(choices)}, got {raw!r}")
    return value


def duration_ms(raw: Any, key: str, minimum_ms: int = 0) -> int:
    """A Paimon duration (``1 d``, ``30 min``) in milliseconds, at least ``minimum_ms``."""
    value = None if isinstance(raw, bool) else duration_millis(str(raw))
    if value is None:
        raise ConfigError(key, f"expected a duration such as '30 min', '1 h' or '2 d', "
                               f"got {raw!r}")
    if value < minimum_ms:
        raise ConfigError(key, f"must be at least {minimum_ms // 1000} s, got {raw!r}")
    return value
