"""Merge functions that must run record by record, per key, in Python: Java
``PartialUpdateMergeFunction`` with sequence groups or ``remove-record-on-delete``,
``AggregateMergeFunction`` with ``aggregation.remove-record-on-delete``, and the aggregate
functions without an Arrow kernel (``FieldListaggAgg`` with distinct, ``FieldCollectAgg``,
``FieldMergeMapAgg``, ``FieldRoaringBitmap32Agg``, ``FieldHllSketchAgg``,
``FieldThetaSketchAgg``; apache/paimon 5dacde516b). Written from
Java's semantics, not its code.

Only keys with two or more versions are merged: Java's ``ReducerMergeFunctionWrapper`` hands a
lone version through untouched (its kind, sequence number and values), and so do these.
Values are Python objects (``to_pylist``); each merged column is rebuilt with its Arrow type.
"""

from __future__ import annotations

import struct
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from paimond.errors import UnsupportedError
from paimond.format.binary.java_order import boxed_hash, java_hashmap_order
from paimond.format.roaring.bitmap32 import read_bitmap, serialize_bitmap
from paimond.format.types.row_kind import RowKind
from paimond.lsm.merge.streaming import SEQUENCE_COLUMN, VALUE_KIND_COLUMN, SortedSlice
from paimond.table.options.merge import MergeConfig

ROW_FUNCTIONS = frozenset({"listagg", "collect", "merge_map", "rbm32", "hll_sketch",
                           "theta_sketch", "nested_update", "nested_partial_update",
                           "merge_map_with_keytime", "rbm64"})  # the last four: nested_aggregates
_RETRACT_KINDS = (RowKind.UPDATE_BEFORE, RowKind.DELETE)


# ---- field aggregators (Java FieldAggregator: agg, aggReversed, retract, reset) -------------


class FieldAgg:
    """One column's aggregate function over Python values."""

    def __init__(self, name: str, function: str) -> None:
        self.name, self.function = name, function

    def agg(self, acc: Any, value: Any) -> Any:
        raise NotImplementedError

    def agg_reversed(self, acc: Any, value: Any) -> Any:
        return self.agg(value, acc)

    def retract(self, acc: Any, value: Any) -> Any:
        raise UnsupportedError(f"aggregate function {self.function!r} (field {self.name}) "
                               "cannot retract; set fields.<c>.ignore-retract (Paimon fails too)")

    def reset(self) -> None:
        return None


class _IgnoreRetract(FieldAgg):
    def __init__(self, inner: FieldAgg) -> None:
        super().__init__(inner.name, inner.function)
        self.inner = inner

    def agg(self, acc: Any, value: Any) -> Any:
        return self.inner.agg(acc, value)

    def agg_reversed(self, acc: Any, value: Any) -> Any:
        return self.inner.agg_reversed(acc, value)

    def retract(self, acc: Any, value: Any) -> Any:
        return acc

    def reset(self) -> None:
        self.inner.reset()


class _Last(FieldAgg):  # last_value, primary-key
    def agg(self, acc: Any, value: Any) -> Any:
        return value

    def retract(self, acc: Any, value: Any) -> Any:
        return value if self.function == "primary-key" else None


class _LastNonNull(FieldAgg):
    def agg(self, acc: Any, value: Any) -> Any:
        return acc if value is None else value

    def retract(self, acc: Any, value: Any) -> Any:
        return None if value is not None else acc


class _First(FieldAgg):  # first_value, first_non_null_value
    def __init__(self, name: str, function: str) -> None:
        super().__init__(name, function)
        self.skip_nulls = function != "first_value"
        self.initialized = False

    def agg(self, acc: Any, value: Any) -> Any:
        if not self.initialized and not (self.skip_nulls and value is None):
            self.initialized = True
            return value
        return acc

    def reset(self) -> None:
        self.initialized = False


def _checked(type_: pa.DataType, name: str) -> Callable[[Any], Any]:
    """Java's exact integer arithmetic: overflow is an error, as Paimon's ArithmeticException."""
    if pa.types.is_integer(type_):
        bits = type_.bit_width
        low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

        def check(value: Any) -> Any:
            if not low <= value <= high:
                raise UnsupportedError(f"field {name}: {type_} overflow ({value}); Paimon's "
                                       "merge fails on it too")
            return value
        return check
    if pa.types.is_float32(type_):
        return lambda value: float(np.float32(value))
    return lambda value: value


class _Arithmetic(FieldAgg):  # sum, product
    def __init__(self, name: str, function: str, type_: pa.DataType) -> None:
        super().__init__(name, function)
        if not (pa.types.is_integer(type_) or pa.types.is_floating(type_)
                or pa.types.is_decimal(type_)):
            raise UnsupportedError(f"aggregate function {function!r} on {type_} (field {name})")
        self.check = _checked(type_, name)
        self.integer = pa.types.is_integer(type_)

    def agg(self, acc: Any, value: Any) -> Any:
        if acc is None or value is None:
            return value if acc is None else acc
        return self.check(acc + value if self.function == "sum" else acc * value)

    def retract(self, acc: Any, value: Any) -> Any:
        if acc is None or value is None:
            if acc is not None:
                return acc
            return None if value is None else (self.check(-value) if self.function == "sum"
                                               else None)
        if self.function == "sum":
            return self.check(acc - value)
        if self.integer:  # Java's integer division truncates toward zero
            quotient = abs(acc) // abs(value)
            return self.check(quotient if (acc < 0) == (value < 0) else -quotient)
        return self.check(acc / value)


class _Compare(FieldAgg):  # min, max, bool_and, bool_or
    def agg(self, acc: Any, value: Any) -> Any:
        if acc is None or value is None:
            return value if acc is None else acc
        if self.function == "min":
            return acc if acc < value else value
        if self.function == "max":
            return acc if acc > value else value
        return (acc and value) if self.function == "bool_and" else (acc or value)


def java_blank(text: str) -> bool:
    """Paimon ``StringUtils.isBlank``: empty or only ``Character.isWhitespace`` characters."""
    return all(_java_whitespace(c) for c in text)


def _java_whitespace(char: str) -> bool:
    if char in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f":
        return True
    return (unicodedata.category(char) in ("Zs", "Zl", "Zp")
            and char not in "\u00a0\u2007\u202f")


class _Listagg(FieldAgg):
    def __init__(self, name: str, delimiter: str, distinct: bool) -> None:
        super().__init__(name, "listagg")
        if distinct and not delimiter:
            raise UnsupportedError(f"listagg with distinct and an empty delimiter (field {name})")
        self.delimiter, self.distinct = delimiter, distinct

    def agg(self, acc: Any, value: Any) -> Any:
        if value is None or java_blank(value):
            return acc
        if acc is None or java_blank(acc):
            return value
        if not self.distinct:
            return acc + self.delimiter + value
        seen = set(acc.split(self.delimiter))
        parts = [acc]
        for token in value.split(self.delimiter):
            if java_blank(token) or token in seen:
                continue
            seen.add(token)
            parts.append(token)
        return self.delimiter.join(parts)


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    if isinstance(value, list):
        return ("\0list", tuple(_hashable(v) for v in value))
    return value


class _Collect(FieldAgg):
    """ARRAY concatenation; ``distinct`` keeps the first of equal elements, in the iteration
    order of the ``HashSet`` Java's ``FieldCollectAgg`` fills (the acc's elements, then the
    input's) where the element's Java object hashes by value (``element_hash``); constructed
    elements (Java compares them in a list) and BINARY ones (``byte[]`` hashes by identity,
    so Java's own order differs from run to run) keep first-seen order."""

    def __init__(self, name: str, distinct: bool,
                 element_hash: Callable[[Any], int] | None = None) -> None:
        super().__init__(name, "collect")
        self.distinct, self.element_hash = distinct, element_hash

    def agg_reversed(self, acc: Any, value: Any) -> Any:
        return self.agg(acc, value)

    def agg(self, acc: Any, value: Any) -> Any:
        if acc is None and value is None:
            return None
        if (acc is None or value is None) and not self.distinct:
            return value if acc is None else acc
        out = list(acc or ()) + list(value or ())
        if not self.distinct:
            return out
        if self.element_hash is not None:
            return java_hashmap_order(out, self.element_hash)
        seen: set[Any] = set()
        unique = []
        for element in out:
            key = _hashable(element)
            if key not in seen:
                seen.add(key)
                unique.append(element)
        return unique

    def retract(self, acc: Any, value: Any) -> Any:
        if acc is None:
            return None
        if not value:
            return acc
        pending = [_hashable(v) for v in value]
        out = []
        for element in acc:
            key = _hashable(element)
            if key in pending:
                pending.remove(key)
            else:
                out.append(element)
        return out


class _MergeMap(FieldAgg):
    """MAP union, the later value winning; Python maps are lists of (key, value). The
    entries come in the iteration order of the ``HashMap`` Java's ``FieldMergeMapAgg`` fills
    where the key's Java object hashes by value (``key_hash``), else first-seen."""

    def __init__(self, name: str, function: str,
                 key_hash: Callable[[Any], int] | None = None) -> None:
        super().__init__(name, function)
        self.key_hash = key_hash

    def _ordered(self, merged: dict[Any, Any], calls: list[Any]) -> list[tuple[Any, Any]]:
        keys = list(merged) if self.key_hash is None else java_hashmap_order(calls, self.key_hash)
        return [(k, merged[k]) for k in keys]

    def agg(self, acc: Any, value: Any) -> Any:
        if acc is None or value is None:
            return value if acc is None else acc
        merged = dict(acc)
        merged.update(value)
        return self._ordered(merged, [k for k, _ in acc] + [k for k, _ in value])

    def retract(self, acc: Any, value: Any) -> Any:
        if acc is None:
            return None
        if not value:
            return acc
        gone = {k for k, _ in value}
        kept = [(k, v) for k, v in acc if k not in gone]
        return self._ordered(dict(kept), [k for k, _ in kept])


class _Rbm32(FieldAgg):
    """Java ``FieldRoaringBitmap32Agg``: the union of two portable 32-bit roaring bitmaps,
    written after run optimization as Java's ``RoaringBitmap32.serialize``."""

    def agg(self, acc: Any, value: Any) -> Any:
        if acc is None or value is None:
            return value if acc is None else acc
        left, _ = read_bitmap(acc, 0)
        right, _ = read_bitmap(value, 0)
        return serialize_bitmap(left | right)


class _Sketch(FieldAgg):
    """Java ``FieldHllSketchAgg`` / ``FieldThetaSketchAgg`` with Apache DataSketches' Python
    library (the same serialized formats): HLL: a union sized by the second sketch's lg_k,
    updated with the second then the first, its HLL_4 result compact; theta: a union of
    default size (lg_k 12, seed 9001) of both, its ordered compact result."""

    def agg(self, acc: Any, value: Any) -> Any:
        if acc is None or value is None:
            return value if acc is None else acc
        import datasketches as ds

        try:
            if self.function == "hll_sketch":
                first, second = ds.hll_sketch.deserialize(acc), ds.hll_sketch.deserialize(value)
                union = ds.hll_union(second.lg_config_k)
                union.update(second)
                union.update(first)
                return bytes(union.get_result(ds.tgt_hll_type.HLL_4).serialize_compact())
            theta = ds.theta_union(12)
            theta.update(ds.compact_theta_sketch.deserialize(acc))
            theta.update(ds.compact_theta_sketch.deserialize(value))
            return _java_theta_bytes(bytes(theta.get_result(True).serialize()))
        except (RuntimeError, ValueError) as error:
            raise UnsupportedError(f"{self.function} (field {self.name}): a value is not a "
                                   f"serialized sketch paimond can read ({error})") from error


def _java_theta_bytes(data: bytes) -> bytes:
    """A compact theta sketch as Java writes it: with two or more preamble longs, Java
    stores the sampling probability p (1.0f for a union's result) in bytes 12-15, where
    DataSketches' C++ writes zeros (readers of either ignore it)."""
    if data and data[0] & 0x3F >= 2:
        return data[:12] + struct.pack("<f", 1.0) + data[16:]
    return data


def make_field_agg(name: str, function: str, type_: pa.DataType, config: MergeConfig) -> FieldAgg:
    """Java ``FieldAggregatorFactory.create``: the function, wrapped to ignore retractions when
    ``fields.<name>.ignore-retract`` is set."""
    agg: FieldAgg
    if function in ("last_value", "primary-key"):
        agg = _Last(name, function)
    elif function == "last_non_null_value":
        agg = _LastNonNull(name, function)
    elif function in ("first_value", "first_non_null_value", "first_not_null_value"):
        agg = _First(name, function)
    elif function in ("sum", "product"):
        agg = _Arithmetic(name, function, type_)
    elif function in ("min", "max", "bool_and", "bool_or"):
        agg = _Compare(name, function)
    elif function == "listagg":
        if not (pa.types.is_string(type_) or pa.types.is_large_string(type_)):
            raise UnsupportedError(f"listagg on {type_} (field {name}): Paimon takes strings")
        agg = _Listagg(name, config.list_agg_delimiters.get(name, ","), name in config.distinct)
    elif function == "collect":
        if not pa.types.is_list(type_):
            raise UnsupportedError(f"collect on {type_} (field {name}): Paimon takes arrays")
        agg = _Collect(name, name in config.distinct, boxed_hash(type_.value_type))
    elif function == "merge_map":
        if not pa.types.is_map(type_):
            raise UnsupportedError(f"merge_map on {type_} (field {name}): Paimon takes maps")
        agg = _MergeMap(name, function, boxed_hash(type_.key_type))
    elif function == "rbm32":
        if not pa.types.is_binary(type_) and not pa.types.is_large_binary(type_):
            raise UnsupportedError(f"rbm32 on {type_} (field {name}): Paimon takes VARBINARY")
        agg = _Rbm32(name, function)
    elif function in ("hll_sketch", "theta_sketch"):
        if not pa.types.is_binary(type_) and not pa.types.is_large_binary(type_):
            raise UnsupportedError(f"{function} on {type_} (field {name}): Paimon takes "
                                   "VARBINARY")
        agg = _Sketch(name, function)
    else:
        from paimond.lsm.merge.nested_aggregates import make_nested_agg  # it imports FieldAgg

        agg = make_nested_agg(name, function, type_, config.nested_options)
    if name in config.ignore_retract:
        if config.aggregation_remove_record_on_delete and config.engine == "aggregation":
            raise UnsupportedError(f"aggregation.remove-record-on-delete and fields.{name}."
                                   "ignore-retract conflict (Paimon refuses both)")
        return _IgnoreRetract(agg)
    return agg


# ---- per-key merge functions ---------------------------------------------------------------

Merged = tuple[list[Any], int, int]  # values, kind, index of the version giving the sequence


class _PartialUpdate:
    """Java ``PartialUpdateMergeFunction`` for one key's versions (oldest first)."""

    def __init__(self, config: MergeConfig, columns: Sequence[str],
                 types: Sequence[pa.DataType]) -> None:
        index = {name: i for i, name in enumerate(columns)}
        self.n = len(columns)
        self.ignore_delete = config.ignore_delete
        self.remove_on_delete = config.remove_record_on_delete
        self.group_of: dict[int, tuple[int, ...]] = {}
        by_sequence: dict[str, int] = {}
        self.group_of_groups: list[tuple[tuple[int, ...], list[int]]] = []
        for sequence, protected in config.sequence_groups:
            fields = tuple(_require(index, name) for name in sequence)
            self.group_of_groups.append((fields, [_require(index, name) for name in protected]))
            for name in protected:
                self.group_of[_require(index, name)] = fields
            for name, i in zip(sequence, fields, strict=True):
                self.group_of[i] = fields
                by_sequence[name] = i
        if config.remove_record_on_delete and self.group_of:
            raise UnsupportedError("sequence-group and partial-update.remove-record-on-delete "
                                   "conflict (Paimon refuses both)")
        if config.ignore_delete and (config.remove_record_on_delete
                                     or config.remove_record_on_sequence_group):
            raise UnsupportedError("ignore-delete and partial-update.remove-record-on-* "
                                   "conflict (Paimon refuses both)")
        missing = [n for n in config.remove_record_on_sequence_group if n not in by_sequence]
        if missing:
            raise UnsupportedError("partial-update.remove-record-on-sequence-group names "
                                   f"{missing}, which are not sequence-group fields")
        self.partial_delete = {by_sequence[n] for n in config.remove_record_on_sequence_group}
        self.aggs = {index[name]: make_field_agg(name, function, types[index[name]], config)
                     for name, function in config.partial_aggregates.items() if name in index}
        sequence_fields = {i for fields, _ in self.group_of_groups for i in fields}
        self.plain = [(i, self.aggs.get(i)) for i in range(self.n) if i not in self.group_of]
        self.groups = [(fields, [(i, self.aggs.get(i)) for i in protected
                                 if i not in sequence_fields])
                       for fields, protected in self.group_of_groups]

    def _compare(self, value: Sequence[Any], row: Sequence[Any], fields: tuple[int, ...]) -> int:
        for i in fields:  # ascending, NULL first
            a, b = value[i], row[i]
            if a is None or b is None:
                if a is None and b is None:
                    continue
                return -1 if a is None else 1
            if a != b:
                return -1 if a < b else 1
        return 0

    def merge(self, kinds: Sequence[int], values: Sequence[Sequence[Any]]) -> Merged:
        for agg in self.aggs.values():
            agg.reset()
        row: list[Any] = [None] * self.n
        filled = meet_insert = delete_row = False
        latest = -1
        for position, (kind, value) in enumerate(zip(kinds, values, strict=True)):
            delete_row = False
            if kind in _RETRACT_KINDS:
                if not filled:
                    row, filled = list(value), True
                if self.ignore_delete:
                    continue
                latest = position
                if self.group_of:
                    row, delete_row = self._retract(row, kind, value)
                    continue
                if self.remove_on_delete:
                    if kind == RowKind.DELETE:
                        delete_row, row = True, list(value)
                    continue
                raise UnsupportedError(
                    "the partial-update merge engine cannot merge -U/-D records without "
                    "ignore-delete, partial-update.remove-record-on-delete or sequence groups "
                    "(Paimon rejects them too)")
            latest = position
            if self.group_of:
                self._update(row, value)
            else:
                for i, field in enumerate(value):
                    if field is not None:
                        row[i] = field
            meet_insert = filled = True
        kind = RowKind.DELETE if delete_row or not meet_insert else RowKind.INSERT
        return row, kind, latest

    def _update(self, row: list[Any], value: Sequence[Any]) -> None:
        # Java walks the columns in order; a group's columns all see one decision (its
        # sequence fields compare the same before and after they are set), and groups and
        # the other columns are independent, so this goes group by group.
        for i, agg in self.plain:
            if agg is not None:
                row[i] = agg.agg(row[i], value[i])
            elif value[i] is not None:
                row[i] = value[i]
        for fields, protected in self.groups:
            newer = self._newer(value, row, fields)
            if newer is None:  # every sequence field NULL: the group is skipped
                continue
            if newer:
                for j in fields:
                    row[j] = value[j]
                for i, agg in protected:
                    row[i] = value[i] if agg is None else agg.agg(row[i], value[i])
            else:
                for i, agg in protected:
                    if agg is not None:
                        row[i] = agg.agg_reversed(row[i], value[i])

    def _newer(self, value: Sequence[Any], row: Sequence[Any], fields: tuple[int, ...]
               ) -> bool | None:
        """None if the version's sequence fields are all NULL, else: is it >= the row's?"""
        if len(fields) == 1:
            new, old = value[fields[0]], row[fields[0]]
            if new is None:
                return None
            return old is None or new >= old
        if all(value[j] is None for j in fields):
            return None
        return self._compare(value, row, fields) >= 0

    def _retract(self, row: list[Any], kind: int, value: Sequence[Any]) -> tuple[list[Any], bool]:
        for fields, protected in self.groups:
            newer = self._newer(value, row, fields)
            if newer is None:
                continue
            if newer:
                if kind == RowKind.DELETE and not self.partial_delete.isdisjoint(fields):
                    return list(value), True
                for j in fields:
                    row[j] = value[j]
                for i, agg in protected:
                    row[i] = None if agg is None else agg.retract(row[i], value[i])
            else:
                for i, agg in protected:
                    if agg is not None:
                        row[i] = agg.retract(row[i], value[i])
        return row, False


def _require(index: Mapping[str, int], name: str) -> int:
    if name not in index:
        raise UnsupportedError(f"sequence-group field {name!r} is not a column of the table")
    return index[name]


class _Aggregate:
    """Java ``AggregateMergeFunction`` for one key's versions, over the given columns."""

    def __init__(self, config: MergeConfig, columns: Sequence[str],
                 types: Sequence[pa.DataType]) -> None:
        self.remove_on_delete = config.aggregation_remove_record_on_delete
        self.aggs = [make_field_agg(name, config.aggregate_functions.get(
            name, "last_non_null_value"), type_, config) for name, type_ in zip(
            columns, types, strict=True)]

    def merge(self, kinds: Sequence[int], values: Sequence[Sequence[Any]]) -> Merged:
        for agg in self.aggs:
            agg.reset()
        row: list[Any] = [None] * len(self.aggs)
        delete_row = False
        for kind, value in zip(kinds, values, strict=True):
            delete_row = self.remove_on_delete and kind == RowKind.DELETE
            if delete_row:
                row = list(value)
            elif kind in _RETRACT_KINDS:
                row = [a.retract(acc, v) for a, acc, v in zip(self.aggs, row, value, strict=True)]
            else:
                row = [a.agg(acc, v) for a, acc, v in zip(self.aggs, row, value, strict=True)]
        return row, RowKind.DELETE if delete_row else RowKind.INSERT, len(kinds) - 1


def merge_rows(piece: SortedSlice, config: MergeConfig, columns: Sequence[str],
               base: pa.Table | None = None) -> pa.Table:
    """Every key of ``piece`` reduced to one row: lone versions as they are, the others
    through the engine's per-key merge function over ``columns`` (the whole row for
    partial-update). ``base`` (one row per key) supplies the columns not merged here."""
    lone = piece.ends - piece.first_rows() == 0
    if base is None:
        base = piece.take(piece.last_rows())
    merged_groups = np.flatnonzero(~lone)
    if not len(merged_groups):
        return base
    types = [piece.rows.schema.field(c).type for c in columns]
    function = (_PartialUpdate(config, columns, types) if config.engine == "partial-update"
                else _Aggregate(config, columns, types))
    rows_mask = ~lone[piece.group_ids]
    positions = np.flatnonzero(rows_mask)
    taken = pa.array(positions)
    kinds = _py_values(piece.column(VALUE_KIND_COLUMN).take(taken))
    data = [_py_values(piece.column(c).take(taken)) for c in columns]
    value_rows = list(zip(*data, strict=True)) if data else [()] * len(positions)
    sizes = (piece.ends - piece.first_rows() + 1)[merged_groups]
    out_values: list[list[Any]] = [[] for _ in columns]
    out_kinds, out_positions = [], []
    start = 0
    for size in sizes.tolist():
        end = start + size
        row, kind, latest = function.merge(kinds[start:end], value_rows[start:end])
        for column, value in zip(out_values, row, strict=True):
            column.append(value)
        out_kinds.append(kind)
        out_positions.append(positions[start + latest] if latest >= 0 else -1)
        start = end
    where = np.full(piece.group_count, -1, np.int64)
    where[merged_groups] = np.arange(len(merged_groups), dtype=np.int64)
    take = pa.array(where, mask=where < 0)
    for name, values, type_ in zip(columns, out_values, types, strict=True):
        merged = pa.array(values, type_).take(take)
        base = base.set_column(base.schema.get_field_index(name), name,
                               pc_coalesce(merged, base.column(name), lone))
    kind_column = pa.array(np.asarray(out_kinds, np.int8)).take(take)
    base = base.set_column(base.schema.get_field_index(VALUE_KIND_COLUMN), VALUE_KIND_COLUMN,
                           pc_coalesce(kind_column, base.column(VALUE_KIND_COLUMN), lone))
    if config.engine == "partial-update":  # Java: the last version not ignored, else 0
        found = np.asarray(out_positions, np.int64)
        sequences = piece.column(SEQUENCE_COLUMN).to_numpy(zero_copy_only=False)
        picked = np.where(found >= 0, sequences[np.maximum(found, 0)], 0)
        sequence_column = np.asarray(base.column(SEQUENCE_COLUMN).to_numpy(), np.int64).copy()
        sequence_column[merged_groups] = picked
        base = base.set_column(base.schema.get_field_index(SEQUENCE_COLUMN), SEQUENCE_COLUMN,
                               pa.array(sequence_column, base.schema.field(SEQUENCE_COLUMN).type))
    return base


def _py_values(values: pa.Array) -> list[Any]:
    """``values.to_pylist()``, through numpy where that is the same and faster."""
    type_ = values.type
    if pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_boolean(type_):
        out: list[Any] = values.fill_null(False if pa.types.is_boolean(type_) else 0
                                          ).to_numpy(zero_copy_only=False).tolist()
        if values.null_count:
            for i in np.flatnonzero(~np.asarray(values.is_valid().to_numpy(
                    zero_copy_only=False), dtype=bool)).tolist():
                out[i] = None
        return out
    if pa.types.is_string(type_) or pa.types.is_large_string(type_) or \
            pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        return list(values.to_numpy(zero_copy_only=False).tolist())
    return list(values.to_pylist())


def pc_coalesce(merged: pa.Array, original: pa.ChunkedArray | pa.Array,
                lone: np.ndarray) -> pa.Array:
    """Per key: the original value for lone keys, the merged one (nulls included) else."""
    import pyarrow.compute as pc

    if isinstance(original, pa.ChunkedArray):
        original = original.combine_chunks()
    return pc.if_else(pa.array(lone), original, merged)
