"""Aggregate functions over nested values and 64-bit bitmaps, per key in Python: Java
``FieldRoaringBitmap64Agg`` (``rbm64``, format/roaring/bitmap64.py), ``FieldNestedUpdateAgg``
(``nested_update``: fields.<c>.nested-key, nested-key-null-strategy, nested-sequence-field,
count-limit), ``FieldNestedPartialUpdateAgg`` (``nested_partial_update``) and
``FieldMergeMapWithKeyTimeAgg`` (``merge_map_with_keytime``: fields.<c>.ts-field), and the
option checks of their factories (apache/paimon 5dacde516b). Written from Java's semantics,
not its code.

Values are ``to_pylist`` values: an ARRAY<ROW> is a list of dicts (or None elements), a MAP a
list of (key, value) pairs. Where Java collects rows in a ``HashMap`` (keyed nested_update,
nested_partial_update, both map functions) its output order is the hash order, which no reader
relies on; paimond keeps the order in which keys were first seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from paimond.errors import CodecError, UnsupportedError
from paimond.format.roaring.bitmap64 import Roaring64
from paimond.lsm.merge.row_merge import FieldAgg

_INT_MAX = (1 << 31) - 1
_STRATEGIES = ("merge", "ignore", "error")


def _names(text: str | None) -> list[str]:
    """Java splits on ',' and trims each name (an empty name stays, as in Java)."""
    return [] if text is None else [part.strip() for part in text.split(",")]


def _row_fields(name: str, type_: pa.DataType, function: str) -> list[str]:
    if not pa.types.is_list(type_) or not pa.types.is_struct(type_.value_type):
        raise UnsupportedError(f"{function} on {type_} (field {name}): Paimon takes "
                               "ARRAY<ROW>")
    return [type_.value_type.field(i).name for i in range(type_.value_type.num_fields)]


def _require_fields(name: str, wanted: Sequence[str], fields: Sequence[str], what: str) -> None:
    missing = [w for w in wanted if w not in fields]
    if missing:
        raise UnsupportedError(f"fields.{name}.{what} names {missing}, not fields of the "
                               f"nested row {list(fields)} (Paimon refuses it too)")


class _NestedKeys:
    """The nested-key projection and its null strategy (Java applyNestedKeyNullStrategy)."""

    def __init__(self, name: str, key: Sequence[str], strategy: str) -> None:
        self.name, self.key, self.strategy = name, tuple(key), strategy

    def of(self, row: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """The row's key, or None when the strategy drops the row."""
        key = tuple(row[k] for k in self.key)
        if self.strategy == "merge" or all(v is not None for v in key):
            return key
        if self.strategy == "ignore":
            return None
        raise UnsupportedError(f"field {self.name}: a nested key holds NULL and "
                               "nested-key-null-strategy is error (Paimon's merge fails too)")


def _compare(new: Mapping[str, Any], old: Mapping[str, Any], fields: Sequence[str]) -> int:
    for f in fields:  # ascending, NULL first
        a, b = new[f], old[f]
        if a is None or b is None:
            if a is None and b is None:
                continue
            return -1 if a is None else 1
        if a != b:
            return -1 if a < b else 1
    return 0


class _NestedUpdate(FieldAgg):
    """ARRAY<ROW> as a nested table: without a nested key the rows are appended (at most
    count-limit); with one, a row replaces the row of its key (when its nested sequence
    fields are >= the old ones), new keys stop at count-limit. Retraction removes equal
    rows (no key) or the rows of the retracted keys."""

    def __init__(self, name: str, keys: _NestedKeys | None, sequence: Sequence[str],
                 count_limit: int) -> None:
        super().__init__(name, "nested_update")
        self.keys, self.sequence, self.limit = keys, tuple(sequence), count_limit

    def agg(self, acc: Any, value: Any) -> Any:
        if value is None:
            return acc
        if self.keys is None:
            if acc is None:
                return [r for r in value if r is not None][:self.limit]
            if len(acc) >= self.limit:  # Java counts the accumulator's NULL elements too
                return acc
            room = self.limit - len(acc)
            return ([r for r in acc if r is not None]
                    + [r for r in value if r is not None][:room])
        rows: dict[tuple[Any, ...], Any] = {}
        if acc is not None:
            self._put(rows, acc, limit_new=False)
        self._put(rows, value, limit_new=True)
        return list(rows.values())

    def _put(self, rows: dict[tuple[Any, ...], Any], array: Sequence[Any], limit_new: bool
             ) -> None:
        assert self.keys is not None
        for row in array:
            if row is None:
                continue
            key = self.keys.of(row)
            if key is None:
                continue
            old = rows.get(key)
            if old is not None:
                if not self.sequence or _compare(row, old, self.sequence) >= 0:
                    rows[key] = row
            elif not limit_new or len(rows) < self.limit:
                rows[key] = row

    def retract(self, acc: Any, value: Any) -> Any:
        if acc is None or value is None:
            return acc
        if self.keys is None:
            gone = [r for r in value if r is not None]
            return [r for r in acc if r is not None and r not in gone]
        rows: dict[tuple[Any, ...], Any] = {}
        for row in acc:
            if row is not None and (key := self.keys.of(row)) is not None:
                rows[key] = row
        for row in value:
            if row is not None and (key := self.keys.of(row)) is not None:
                rows.pop(key, None)
        return list(rows.values())


class _NestedPartialUpdate(FieldAgg):
    """ARRAY<ROW> rows merged per nested key: each non-NULL field of a later row overwrites
    the key's row (every row of the accumulator and the input, in order)."""

    def __init__(self, name: str, keys: _NestedKeys, fields: Sequence[str]) -> None:
        super().__init__(name, "nested_partial_update")
        self.keys, self.fields = keys, tuple(fields)

    def agg(self, acc: Any, value: Any) -> Any:
        if value is None:
            return acc
        merged: dict[tuple[Any, ...], dict[str, Any]] = {}
        for row in (*(acc or ()), *value):
            if row is None or (key := self.keys.of(row)) is None:
                continue
            target = merged.setdefault(key, dict.fromkeys(self.fields))
            for f in self.fields:
                if row[f] is not None:
                    target[f] = row[f]
        return list(merged.values())


class _MergeMapWithKeyTime(FieldAgg):
    """MAP<K, ROW> union where an entry replaces its key's only when its timestamp field (a
    string) is later; a NULL value deletes the key; an entry with a NULL timestamp is skipped
    (unless the accumulator is NULL: then the input is taken as it is)."""

    def __init__(self, name: str, ts_field: str) -> None:
        super().__init__(name, "merge_map_with_keytime")
        self.ts = ts_field

    def agg(self, acc: Any, value: Any) -> Any:
        if acc is None:
            return value
        if value is None:
            return acc
        merged = dict(acc)
        for key, row in value:
            if row is None:
                merged.pop(key, None)
                continue
            new = row[self.ts]
            if new is None:
                continue
            old = merged.get(key)
            if old is None or old[self.ts] is None or _java_after(new, old[self.ts]):
                merged[key] = row
        return list(merged.items())


class _Rbm64(FieldAgg):
    """The union of two serialized ``Roaring64Bitmap``s, in Java's bytes (no retraction).
    The bitmap behind the bytes it last returned is kept: the next union of a key starts
    from it instead of decoding them again (it equals their decoding)."""

    def __init__(self, name: str, function: str) -> None:
        super().__init__(name, function)
        self.last: tuple[bytes, Roaring64] | None = None

    def agg(self, acc: Any, value: Any) -> Any:
        if acc is None or value is None:
            return value if acc is None else acc
        try:
            bitmap = (self.last[1] if self.last is not None and self.last[0] is acc
                      else Roaring64.decode(acc))
            bitmap.union(Roaring64.decode(value))
            out = bitmap.encode()
        except CodecError as error:
            raise UnsupportedError(f"rbm64 (field {self.name}): a value is not a serialized "
                                   f"Roaring64Bitmap ({error})") from error
        self.last = (out, bitmap)
        return out

    def reset(self) -> None:
        self.last = None


def _java_after(new: str, old: str) -> bool:
    """Java ``String.compareTo`` > 0: UTF-16 code units, unsigned, in order."""
    return new.encode("utf-16-be") > old.encode("utf-16-be")


def make_nested_agg(name: str, function: str, type_: pa.DataType,
                    options: Mapping[str, Mapping[str, str]]) -> FieldAgg:
    """Java's factory for ``function`` with the field's options (suffix -> column -> value);
    a setting Java's factory refuses raises UnsupportedError."""
    def get(suffix: str) -> str | None:
        return options.get(suffix, {}).get(name)

    if function == "rbm64":
        if not pa.types.is_binary(type_) and not pa.types.is_large_binary(type_):
            raise UnsupportedError(f"rbm64 on {type_} (field {name}): Paimon takes VARBINARY")
        return _Rbm64(name, function)

    if function == "merge_map_with_keytime":
        if not pa.types.is_map(type_) or not pa.types.is_struct(type_.item_type):
            raise UnsupportedError(f"merge_map_with_keytime on {type_} (field {name}): Paimon "
                                   "takes MAP<K, ROW>")
        row = type_.item_type
        if row.num_fields < 2:
            raise UnsupportedError(f"merge_map_with_keytime (field {name}): the ROW needs two "
                                   "fields or more (Paimon refuses it too)")
        names = [row.field(i).name for i in range(row.num_fields)]
        ts = get("ts-field") or names[-1]
        _require_fields(name, [ts], names, "ts-field")
        ts_type = row.field(ts).type
        if not (pa.types.is_string(ts_type) or pa.types.is_large_string(ts_type)):
            raise UnsupportedError(f"merge_map_with_keytime (field {name}): the timestamp field "
                                   f"{ts!r} is {ts_type}; Paimon reads it as a string")
        return _MergeMapWithKeyTime(name, ts)
    if function not in ("nested_update", "nested_partial_update"):
        raise UnsupportedError(f"aggregate function {function!r} (field {name})")
    fields = _row_fields(name, type_, function)
    key = _names(get("nested-key"))
    strategy_text = get("nested-key-null-strategy")
    strategy = (strategy_text or "merge").lower()
    if strategy not in _STRATEGIES:
        raise UnsupportedError(f"fields.{name}.nested-key-null-strategy={strategy_text!r}")
    _require_fields(name, key, fields, "nested-key")
    keys = _NestedKeys(name, key, strategy) if key else None
    if function == "nested_partial_update":
        if keys is None:
            raise UnsupportedError(f"nested_partial_update (field {name}) needs "
                                   f"fields.{name}.nested-key (Paimon refuses it too)")
        return _NestedPartialUpdate(name, keys, fields)
    sequence = _names(get("nested-sequence-field"))
    if keys is None and (strategy_text is not None or sequence):
        raise UnsupportedError(f"fields.{name}.nested-key-null-strategy and "
                               "nested-sequence-field need fields.<c>.nested-key "
                               "(Paimon refuses them too)")
    _require_fields(name, sequence, fields, "nested-sequence-field")
    limit_text = get("count-limit")
    try:
        limit = _INT_MAX if limit_text is None else int(limit_text)
    except ValueError:
        raise UnsupportedError(f"fields.{name}.count-limit={limit_text!r} is not an integer"
                               ) from None
    return _NestedUpdate(name, keys, sequence, limit)
