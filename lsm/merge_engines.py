"""Merge engines as vectorized reducers over a sorted slice: Java
``DeduplicateMergeFunction``, ``PartialUpdateMergeFunction``, ``AggregateMergeFunction``,
``FirstRowMergeFunction`` (apache/paimon 5dacde516b).

A reducer turns every key group of a :class:`SortedSlice` (versions ordered oldest first)
into one row, with Arrow kernels only. What paimond does not implement raises
:class:`UnsupportedError` before any file is written, never a silently different result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import UnsupportedError
from paimond.format.schema import TableSchema
from paimond.lsm.merge import (
    KIND_INSERT,
    KIND_UPDATE_AFTER,
    VALUE_KIND_COLUMN,
    Reducer,
    SortedSlice,
)

ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
# Aggregate functions with a vectorized implementation: name -> (arrow kernel, skip nulls).
_ORDERED = {"last_value": False, "last_non_null_value": True, "primary-key": False}
_FIRST = {"first_value": False, "first_non_null_value": True, "first_not_null_value": True}
_ARROW = {"sum": "sum", "product": "product", "min": "min", "max": "max",
          "bool_and": "all", "bool_or": "any"}
_RETRACTABLE = {"sum", "last_value", "last_non_null_value", "primary-key"}


@dataclass(frozen=True, slots=True)
class MergeConfig:
    engine: str = "deduplicate"
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    aggregate_functions: Mapping[str, str] = field(default_factory=dict)
    ignore_retract: frozenset[str] = frozenset()
    sequence_fields: tuple[str, ...] = ()
    sequence_descending: bool = False

    @classmethod
    def of(cls, schema: TableSchema) -> MergeConfig:
        options = schema.options
        engine = (options.get("merge-engine") or "deduplicate").strip().lower()
        if engine not in ENGINES:
            raise UnsupportedError(f"merge-engine {engine!r}")
        if any(k.endswith(".sequence-group") for k in options):
            raise UnsupportedError("partial-update sequence groups (fields.*.sequence-group) "
                                   "are not supported by paimond yet")
        ignore_delete = any(options.get(f"{p}ignore-delete", "false").lower() == "true"
                            for p in ("", "first-row.", "deduplicate.", "partial-update."))
        default = options.get("fields.default-aggregate-function", "last_non_null_value")
        sequence = tuple(s.strip() for s in options.get("sequence.field", "").split(",") if s.strip())
        functions = {}
        for f in schema.fields:
            if f.name in schema.primary_keys:
                functions[f.name] = "primary-key"
            elif f.name in sequence:
                functions[f.name] = "last_value"
            else:
                functions[f.name] = options.get(f"fields.{f.name}.aggregate-function", default)
        return cls(
            engine=engine, ignore_delete=ignore_delete,
            remove_record_on_delete=options.get("partial-update.remove-record-on-delete",
                                                "false").lower() == "true",
            aggregate_functions=functions,
            ignore_retract=frozenset(f.name for f in schema.fields if options.get(
                f"fields.{f.name}.ignore-retract", "false").lower() == "true"),
            sequence_fields=sequence,
            sequence_descending=options.get("sequence.field.sort-order", "ascending").lower()
            == "descending",
        )

    def check_supported(self) -> None:
        """Raise for anything the reducers below cannot do exactly."""
        if self.engine == "aggregation":
            for name, function in self.aggregate_functions.items():
                if function not in {*_ORDERED, *_FIRST, *_ARROW}:
                    raise UnsupportedError(
                        f"aggregate function {function!r} (field {name}) is not supported by "
                        f"paimond yet; supported: {sorted({*_ORDERED, *_FIRST, *_ARROW})}")


def _is_add(table: pa.Table) -> pa.Array:
    kinds = pa.array([KIND_INSERT, KIND_UPDATE_AFTER], pa.int8())
    return pc.is_in(table.column(VALUE_KIND_COLUMN), kinds)


def _group_pick(piece: SortedSlice, mask: pa.Array | None, last: bool) -> tuple[pa.Array, pa.Array]:
    """(group id, row index) of the last (or first) row of each group among rows in ``mask``."""
    indices = pa.table({"g": piece.group_ids,
                        "i": pa.array(range(piece.table.num_rows), pa.int64())})
    if mask is not None:
        indices = indices.filter(mask)
    grouped = indices.group_by("g", use_threads=False).aggregate([("i", "last" if last else "first")])
    return grouped.column("g").combine_chunks(), grouped.column(1).combine_chunks()


def _rows(piece: SortedSlice, indices: pa.Array) -> pa.Table:
    return piece.table.take(indices)


def _reject_retracts(piece: SortedSlice, engine: str) -> None:
    if not pc.all(_is_add(piece.table)).as_py():
        raise UnsupportedError(f"the {engine} merge engine cannot merge -U/-D records unless "
                               "ignore-delete is set (Paimon rejects them too)")


def _deduplicate(piece: SortedSlice, config: MergeConfig) -> pa.Table:
    if config.ignore_delete:
        return _rows(piece, _group_pick(piece, _is_add(piece.table), last=True)[1])
    return _rows(piece, piece.last_rows())


def _first_row(piece: SortedSlice, config: MergeConfig) -> pa.Table:
    if config.ignore_delete:
        return _rows(piece, _group_pick(piece, _is_add(piece.table), last=False)[1])
    _reject_retracts(piece, "first-row")
    return _rows(piece, piece.first_rows())


def _fill_by_group(piece: SortedSlice, base: pa.Table, groups: pa.Array, column: str,
                   indices: pa.Array) -> pa.Array:
    """Per output group, the value of ``column`` at ``indices`` (null where a group has none)."""
    values = piece.table.column(column).take(indices)
    position = pc.index_in(pa.array(range(piece.group_count), pa.int64()), value_set=groups)
    return values.take(position) if len(values) else pa.nulls(base.num_rows, values.type)


def _partial_update(piece: SortedSlice, config: MergeConfig, value_columns: Sequence[str]
                    ) -> pa.Table:
    table = piece.table
    mask = None
    if config.ignore_delete:
        mask = _is_add(table)
    elif config.remove_record_on_delete:
        raise UnsupportedError("partial-update.remove-record-on-delete is not supported by "
                               "paimond yet")
    else:
        _reject_retracts(piece, "partial-update")
    base = _rows(piece, piece.last_rows())
    for column in value_columns:
        valid = pc.is_valid(table.column(column))
        groups, indices = _group_pick(piece, valid if mask is None else pc.and_(valid, mask),
                                      last=True)
        merged = _fill_by_group(piece, base, groups, column, indices)
        base = base.set_column(base.schema.get_field_index(column), column, merged)
    return base.set_column(base.schema.get_field_index(VALUE_KIND_COLUMN), VALUE_KIND_COLUMN,
                           pa.array([KIND_INSERT] * base.num_rows, pa.int8()))


def _aggregate(piece: SortedSlice, config: MergeConfig, value_columns: Sequence[str]) -> pa.Table:
    table = piece.table
    retract = pc.invert(_is_add(table))
    has_retract = pc.any(retract).as_py()
    base = _rows(piece, piece.last_rows())
    for column in value_columns:
        function = config.aggregate_functions.get(column, "last_non_null_value")
        rows_mask = None
        values = table.column(column)
        if has_retract and column in config.ignore_retract:
            rows_mask = pc.invert(retract)
        elif has_retract and function not in _RETRACTABLE:
            raise UnsupportedError(f"aggregate function {function!r} (field {column}) cannot "
                                   "retract; set fields.<c>.ignore-retract")
        if function in _ARROW:
            merged = _arrow_aggregate(piece, values, function, rows_mask,
                                      retract if has_retract and rows_mask is None else None)
        else:
            skip_nulls = _ORDERED.get(function, _FIRST.get(function, False))
            mask = pc.is_valid(values) if skip_nulls else None
            if rows_mask is not None:
                mask = rows_mask if mask is None else pc.and_(mask, rows_mask)
            groups, indices = _group_pick(piece, mask, last=function not in _FIRST)
            merged = _fill_by_group(piece, base, groups, column, indices)
        base = base.set_column(base.schema.get_field_index(column), column, merged)
    return base.set_column(base.schema.get_field_index(VALUE_KIND_COLUMN), VALUE_KIND_COLUMN,
                           pa.array([KIND_INSERT] * base.num_rows, pa.int8()))


def _arrow_aggregate(piece: SortedSlice, values: pa.ChunkedArray, function: str,
                     mask: pa.Array | None, negate: pa.Array | None) -> pa.Array:
    column = values.combine_chunks()
    if negate is not None:  # sum: a retraction subtracts its value
        column = pc.if_else(negate, pc.negate_checked(column), column)
    data = pa.table({"g": piece.group_ids, "v": column})
    if mask is not None:
        data = data.filter(mask)
    grouped = data.group_by("g", use_threads=False).aggregate([("v", _ARROW[function])])
    out = grouped.column(1).combine_chunks()
    position = pc.index_in(pa.array(range(piece.group_count), pa.int64()),
                           value_set=grouped.column("g").combine_chunks())
    return out.take(position).cast(column.type)


def make_reducer(config: MergeConfig, value_columns: Sequence[str], drop_deletes: bool) -> Reducer:
    """The reducer of a table's merge engine; drops -U/-D results when ``drop_deletes``."""
    config.check_supported()

    def reduce(piece: SortedSlice) -> pa.Table:
        if config.engine == "deduplicate":
            out = _deduplicate(piece, config)
        elif config.engine == "first-row":
            out = _first_row(piece, config)
        elif config.engine == "partial-update":
            out = _partial_update(piece, config, value_columns)
        else:
            out = _aggregate(piece, config, value_columns)
        if drop_deletes:
            out = out.filter(_is_add(out))
        return out

    return reduce

