"""Paimon's option value grammar (``MemorySize``, ``TimeUtils.parseDuration``) and the typed
readers every family of table options is built on: one option, its default, and the error a
value that does not parse gives. ``TableOptions`` (table/options/core.py) puts the families together.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from paimond.durations import duration_millis
from paimond.errors import ConfigError, UnsupportedError

INT_MAX = 2**31 - 1

_SIZE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
               "g": 1 << 30, "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
               "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "bytes": 1}
_SIZE = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_memory_size(text: str) -> int:
    """Parse Paimon's MemorySize strings (``128 mb``, ``64kb``, ``1024``) into bytes."""
    match = _SIZE.match(text)
    if not match or match.group(2).lower() not in _SIZE_UNITS:
        raise ValueError(f"not a memory size: {text!r}")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def parse_duration_millis(text: str) -> int:
    """Paimon ``TimeUtils.parseDuration`` forms: ``30 min``, ``1h``, ``500ms``, ``2 d``."""
    millis = duration_millis(text)
    if millis is None:
        raise ValueError(f"not a duration: {text!r}")
    return millis


class OptionReader:
    """The options as set (a schema's), and a typed reader per kind of value."""

    __slots__ = ()  # the dataclass that puts the families together holds the fields
    raw: Mapping[str, str]
    schema_version: int
    has_primary_key: bool
    bitmap_version_in_use: int | None

    def _int(self, key: str, default: int) -> int:
        value = self.raw.get(key)
        if value is None:
            return default
        try:
            return int(value.strip())
        except ValueError:
            raise UnsupportedError(f"option {key}={value!r} is not an integer") from None

    def _text(self, key: str) -> str | None:
        value = self.raw.get(key)
        return None if value is None else value.strip()

    def _optional(self, key: str, parse: Callable[[str], int], what: str,
                  error: type[Exception] = UnsupportedError) -> int | None:
        value = self.raw.get(key)
        if value is None:
            return None
        try:
            return parse(value)
        except ValueError:
            if error is ConfigError:
                raise ConfigError(key, f"{value!r} is not {what}") from None
            raise UnsupportedError(f"option {key}={value!r} is not {what}") from None

    def _bool(self, key: str, default: bool) -> bool:
        value = self.raw.get(key)
        return default if value is None else value.strip().lower() == "true"

    def _size(self, key: str, default: int) -> int:
        value = self.raw.get(key)
        if value is None:
            return default
        try:
            return parse_memory_size(value)
        except ValueError:
            raise UnsupportedError(f"option {key}={value!r} is not a memory size") from None

    def _expire_int(self, key: str) -> int | None:
        return self._optional(key, lambda v: int(v.strip()), "an integer", ConfigError)

    def _expire_duration_ms(self, key: str) -> int | None:
        return self._optional(key, parse_duration_millis, "a duration", ConfigError)

    def _enum(self, key: str, default: str, values: tuple[str, ...]) -> str:
        """A Java enum option: one of its values in any case (Java ``convertToEnum``)."""
        value = self.raw.get(key)
        if value is None:
            return default
        text = value.strip().lower()
        if text in values:
            return text
        raise ConfigError(key, f"{value!r} is not one of {', '.join(values)}")

    def _level_map(self, key: str) -> dict[int, str]:
        """A Java map option such as ``0:avro,3:parquet``, keyed by level."""
        value = self.raw.get(key)
        if not value or not value.strip():
            return {}
        result = {}
        for item in value.split(","):
            level, sep, setting = item.partition(":")
            try:
                if not sep:
                    raise ValueError(item)
                result[int(level.strip())] = setting.strip()
            except ValueError:
                raise UnsupportedError(f"option {key}={value!r} is not a map of level:value") from None
        return result
