"""A plain model of Paimon's nested aggregate functions for tests, from the documented
semantics (docs/primary-key-table/merge-engine/aggregation, Java's Field*Agg contracts):
``nested_update``, ``nested_partial_update``, ``merge_map_with_keytime``, and an aggregation
table's fold over one key's versions. Rows of a nested table are dicts; maps are lists of
(key, value). Order inside a keyed result is not modelled: compare with :func:`canonical`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

ADD, RETRACT = "add", "retract"


def _key(row: dict[str, Any], key: Sequence[str]) -> tuple[Any, ...]:
    return tuple(row[k] for k in key)


def _usable(row: Any, key: Sequence[str], strategy: str) -> bool:
    if row is None:
        return False
    if strategy == "ignore" and any(row[k] is None for k in key):
        return False
    if strategy == "error" and any(row[k] is None for k in key):
        raise ValueError("NULL nested key")
    return True


def _seq_ge(new: dict[str, Any], old: dict[str, Any], fields: Sequence[str]) -> bool:
    """new >= old on the sequence fields, ascending, NULL lowest."""
    return ([(new[f] is not None, new[f]) for f in fields]
            >= [(old[f] is not None, old[f]) for f in fields])


def nested_update(acc: list[Any] | None, value: list[Any] | None, *, key: Sequence[str] = (),
                  strategy: str = "merge", sequence: Sequence[str] = (),
                  limit: int = 2**31 - 1) -> list[Any] | None:
    if value is None:
        return acc
    incoming = [r for r in value if r is not None]
    if not key:
        if acc is None:
            return incoming[:limit]
        if len(acc) >= limit:  # the accumulator's length counts its NULL elements
            return acc
        return [r for r in acc if r is not None] + incoming[:limit - len(acc)]
    table: dict[tuple[Any, ...], Any] = {}
    for row in acc or []:
        if _usable(row, key, strategy):
            k = _key(row, key)
            if k not in table or not sequence or _seq_ge(row, table[k], sequence):
                table[k] = row
    for row in incoming:
        if not _usable(row, key, strategy):
            continue
        k = _key(row, key)
        if k in table:
            if not sequence or _seq_ge(row, table[k], sequence):
                table[k] = row
        elif len(table) < limit:
            table[k] = row
    return list(table.values())


def nested_update_retract(acc: list[Any] | None, value: list[Any] | None, *,
                          key: Sequence[str] = (), strategy: str = "merge") -> list[Any] | None:
    if acc is None or value is None:
        return acc
    if not key:
        return [r for r in acc if r is not None and r not in value]
    gone = {_key(r, key) for r in value if _usable(r, key, strategy)}
    table = {_key(r, key): r for r in acc if _usable(r, key, strategy)}
    return [r for k, r in table.items() if k not in gone]


def nested_partial_update(acc: list[Any] | None, value: list[Any] | None, *,
                          key: Sequence[str], fields: Sequence[str],
                          strategy: str = "merge") -> list[Any] | None:
    if value is None:
        return acc
    table: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in [*(acc or []), *value]:
        if not _usable(row, key, strategy):
            continue
        merged = table.setdefault(_key(row, key), dict.fromkeys(fields))
        merged.update({f: v for f, v in row.items() if v is not None})
    return list(table.values())


def _utf16(text: str) -> list[int]:
    units = []
    for char in text:
        point = ord(char)
        if point < 0x10000:
            units.append(point)
        else:  # a surrogate pair
            point -= 0x10000
            units += [0xD800 + (point >> 10), 0xDC00 + (point & 0x3FF)]
    return units


def _java_less(a: str, b: str) -> bool:
    """Java String.compareTo < 0: UTF-16 code units in order."""
    return _utf16(a) < _utf16(b)


def merge_map_with_keytime(acc: list[Any] | None, value: list[Any] | None, ts: str
                           ) -> list[Any] | None:
    if acc is None:
        return value
    if value is None:
        return acc
    table = dict(acc)
    for k, row in value:
        if row is None:
            table.pop(k, None)
        elif row[ts] is None:
            continue
        elif table.get(k) is None or table[k][ts] is None or _java_less(table[k][ts], row[ts]):
            table[k] = row
    return list(table.items())


Fold = Callable[[Any, Any], Any]


def fold(versions: Sequence[tuple[str, Any]], agg: Fold, retract: Fold | None) -> Any:
    """An aggregation column over one key's versions (kind, value), oldest first; a lone
    version stays as written. ``retract`` None: retractions are ignored (ignore-retract)."""
    if len(versions) == 1:
        return versions[0][1]
    acc = None
    for kind, value in versions:
        if kind == ADD:
            acc = agg(acc, value)
        elif retract is not None:
            acc = retract(acc, value)
    return acc


def canonical(value: Any) -> Any:
    """Order-free form of a nested value: lists of rows and maps become sorted JSON texts."""
    if value is None:
        return None
    if isinstance(value, list):
        return sorted(json.dumps(canonical(v), sort_keys=True, default=str) for v in value)
    if isinstance(value, tuple):
        return [canonical(v) for v in value]
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    return value
