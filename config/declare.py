"""Settings declared once: a dataclass field carries its default, its doc string and what a
config file may give it (minimum, maximum, choices, a duration, whether the daemon's
``[jobs.<name>]`` section may set it), and one parser reads a section of the file into any
such dataclass by its annotations and those facts. The config reference is rendered from the
same declarations (``config/reference.py``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from paimond.config.values import choice, duration_ms, flag, names, number
from paimond.errors import ConfigError

_META = "paimond"


class _Same:
    def __repr__(self) -> str:
        return "SAME"


SAME: Any = _Same()  # a daemon default equal to the field's own default


@dataclass(frozen=True, slots=True)
class Declared:
    """What the file may say about one setting."""

    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    duration: bool = False  # a Paimon duration ("30 min") held in milliseconds
    daemon: bool = False  # the daemon's [jobs.<name>] section may set it
    key: str | None = None  # the file's key when it is not the field's name
    daemon_default: Any = SAME  # the daemon's default when it differs from the field's
    not_below: str | None = None  # another field of the section this one may not be less than


def setting(default: Any, doc: str, **facts: Any) -> Any:
    """A dataclass field with its default and :class:`Declared` facts (``doc`` is required)."""
    return dataclasses.field(default=default, metadata={_META: Declared(doc, **facts)})


@dataclass(frozen=True, slots=True)
class DeclaredField:
    """One declared field of a dataclass, as the parser and the reference see it."""

    name: str  # the attribute
    key: str  # the file's key
    kind: type  # bool, int, float or str (a duration is an int)
    optional: bool  # None is its default (not set)
    default: Any
    declared: Declared

    @property
    def daemon_default(self) -> Any:
        return self.default if self.declared.daemon_default is SAME else self.declared.daemon_default


def _kind(hint: Any) -> tuple[type, bool]:
    """The scalar type of an annotation (``tuple``: a tuple of strings) and whether it admits
    None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args == (str, ...):
        return tuple, False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 and isinstance(rest[0], type) else object), True
    return (hint if isinstance(hint, type) else object), False


def declared_fields(settings_type: type[Any]) -> tuple[DeclaredField, ...]:
    """The fields of ``settings_type`` declared with :func:`setting`, in their order."""
    hints = typing.get_type_hints(settings_type)
    out = []
    for f in dataclasses.fields(settings_type):
        declared = f.metadata.get(_META)
        if declared is None:
            continue
        kind, optional = _kind(hints[f.name])
        out.append(DeclaredField(f.name, declared.key or f.name, kind, optional, f.default,
                                 declared))
    return tuple(out)


def undeclared(settings_type: type[Any]) -> list[str]:
    """Fields of ``settings_type`` without a declaration (each must have one)."""
    return [f.name for f in dataclasses.fields(settings_type) if _META not in f.metadata]


def parse_value(raw: Any, key: str, kind: type, declared: Declared) -> Any:
    """``raw`` (a file's or an environment variable's value) checked into ``kind``."""
    if declared.duration:
        return duration_ms(raw, key, int(declared.minimum or 0))
    if kind is bool:
        return flag(raw, key)
    if kind is tuple:
        return names(raw, key)
    if kind is int or kind is float:
        return number(raw, key, kind, declared.minimum if declared.minimum is not None else
                      float("-inf"), declared.maximum)
    if declared.choices:
        return choice(raw, key, declared.choices)
    if kind is str:
        return str(raw)
    raise ConfigError(key, f"cannot be set in the config file ({kind.__name__})")


def parse_section(fields: tuple[DeclaredField, ...], section: Mapping[str, Any], key: str,
                  extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The values ``section`` sets, by field name; a key outside ``fields`` and ``extra`` is
    refused naming it (``key`` is the section's, e.g. ``jobs.expire``)."""
    by_key = {f.key: f for f in fields}
    known = sorted({*by_key, *extra})
    unknown = sorted(set(section) - set(known))
    if unknown:
        raise ConfigError(f"{key}.{unknown[0]}", f"unknown key; known: {', '.join(known)}")
    values = {by_key[k].name: parse_value(raw, f"{key}.{k}", by_key[k].kind, by_key[k].declared)
              for k, raw in section.items() if k in by_key}
    for f in fields:
        other = f.declared.not_below
        if other is None or values.get(f.name) is None or values.get(other) is None:
            continue
        if values[f.name] < values[other]:
            other_key = next(g.key for g in fields if g.name == other)
            raise ConfigError(f"{key}.{f.key}", f"must not be less than {other_key} "
                                                f"({values[other]}), got {values[f.name]}")
    return values


@dataclass(frozen=True, slots=True)
class Key:
    """One key of a section that is not a dataclass's: its file name (``http.port``), what it
    holds, its default (None: not set) and its facts; ``attr``: the ``Settings`` attribute the
    loader fills from it by :func:`parse_value` (None: the loader reads it itself)."""

    name: str
    kind: type | str  # a type parse_value reads, or what a hand-read key holds
    default: Any
    declared: Declared
    attr: str | None = None

    @property
    def section(self) -> str:
        return self.name.rpartition(".")[0]

    @property
    def leaf(self) -> str:
        return self.name.rpartition(".")[2]

    def parse(self, raw: Any, key: str | None = None) -> Any:
        if not isinstance(self.kind, type):
            raise TypeError(f"{self.name} is read by hand")
        return parse_value(raw, key or self.name, self.kind, self.declared)


def type_name(kind: type | str, declared: Declared, optional: bool = False) -> str:
    """How the reference names what a key holds."""
    name = ("duration" if declared.duration else kind if isinstance(kind, str)
            else "list of strings" if kind is tuple else kind.__name__)
    return f"{name} (optional)" if optional else name
