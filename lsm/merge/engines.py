"""Merge engines as vectorized reducers over a sorted slice: Java
``DeduplicateMergeFunction``, ``PartialUpdateMergeFunction``, ``AggregateMergeFunction``,
``FirstRowMergeFunction`` (apache/paimon 5dacde516b).

A reducer turns every key group of a :class:`SortedSlice` (versions ordered oldest first)
into one row, with Arrow kernels only. What paimond does not implement raises
:class:`UnsupportedError` before any file is written, never a silently different result.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimond.errors import UnsupportedError
from paimond.format.types.row_kind import RowKind
from paimond.lsm.merge.row_merge import ROW_FUNCTIONS, merge_rows, pc_coalesce
from paimond.lsm.merge.streaming import VALUE_KIND_COLUMN, Reducer, SortedSlice, arrow_of, is_add
from paimond.table.options.merge import MergeConfig

# Aggregate functions with a vectorized implementation: name -> (arrow kernel, skip nulls).
_ORDERED = {"last_value": False, "last_non_null_value": True, "primary-key": False}
_FIRST = {"first_value": False, "first_non_null_value": True, "first_not_null_value": True}
_ARROW = {"sum": "sum", "product": "product", "min": "min", "max": "max",
          "bool_and": "all", "bool_or": "any"}
_RETRACTABLE = {"sum", "last_value", "last_non_null_value", "primary-key"}
# Every function reduced exactly: the Arrow ones and the per-key Python ones (lsm/merge/row_merge.py).
SUPPORTED = frozenset({*_ORDERED, *_FIRST, *_ARROW, *ROW_FUNCTIONS})


def check_supported(config: MergeConfig) -> None:
    """Raise for anything the reducers below cannot do exactly."""
    if config.engine == "aggregation":
        for name, function in config.aggregate_functions.items():
            if function not in SUPPORTED:
                raise UnsupportedError(
                    f"aggregate function {function!r} (field {name}) is not supported by "
                    f"paimond yet; supported: {sorted(SUPPORTED)}")
    if config.engine == "partial-update":
        for name, function in config.partial_aggregates.items():
            if function not in SUPPORTED:
                raise UnsupportedError(
                    f"aggregate function {function!r} (field {name}) is not supported by "
                    "paimond yet")


def _adds(piece: SortedSlice) -> np.ndarray:
    """Per sorted row: is it +I/+U?"""
    return np.asarray(is_add(piece.column(VALUE_KIND_COLUMN)).to_numpy(zero_copy_only=False),
                      dtype=bool)


def _valid(values: pa.Array) -> np.ndarray:
    return np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _valid_if_null(values: pa.Array) -> np.ndarray | None:
    """Per row, is it valid; None when every row is (no mask needed: a key's last valid
    value is its last value)."""
    return _valid(values) if values.null_count else None


def _group_pick(piece: SortedSlice, mask: np.ndarray | None, last: bool
                ) -> tuple[np.ndarray, np.ndarray]:
    """(group, position) of the last (or first) row of each group among rows in ``mask``;
    groups without such a row are left out."""
    if mask is None:
        positions = piece.last_rows() if last else piece.first_rows()
        return np.arange(piece.group_count, dtype=np.int64), positions
    positions = np.flatnonzero(mask)
    groups = piece.group_ids[positions]
    if last:
        keep = np.append(groups[1:] != groups[:-1], True) if len(groups) else groups.astype(bool)
    else:
        keep = np.insert(groups[1:] != groups[:-1], 0, True) if len(groups) else groups.astype(bool)
    return groups[keep], positions[keep]


def _reject_retracts(piece: SortedSlice, engine: str) -> None:
    if not _adds(piece).all():
        raise UnsupportedError(f"the {engine} merge engine cannot merge -U/-D records unless "
                               "ignore-delete is set (Paimon rejects them too)")


def _by_group(piece: SortedSlice, groups: np.ndarray, values: pa.Array) -> pa.Array:
    """``values`` (one per listed group) spread over every group, null where a group has none."""
    if len(groups) == piece.group_count:
        return values
    where = np.full(piece.group_count, -1, np.int64)
    where[groups] = np.arange(len(groups), dtype=np.int64)
    return values.take(pa.array(where, mask=where < 0))


def _deduplicate(piece: SortedSlice, config: MergeConfig, drop_deletes: bool) -> pa.Table:
    """Newest version of each key, with the surviving rows taken once."""
    mask = _adds(piece) if config.ignore_delete else None
    groups, positions = _group_pick(piece, mask, last=True)
    if drop_deletes and mask is None:
        positions = positions[_adds_at(piece, positions)]
    return piece.take(positions)


def _adds_at(piece: SortedSlice, positions: np.ndarray) -> np.ndarray:
    """Per position: is that sorted row +I/+U? Read from the kinds as numpy (one byte a
    row, no nulls in data files), which costs less than an Arrow take and ``is_in``."""
    kinds = piece.rows.column(VALUE_KIND_COLUMN)
    if kinds.null_count or not pa.types.is_int8(kinds.type):
        taken = kinds.take(arrow_of(piece.order[positions]))
        return np.asarray(is_add(taken).to_numpy(zero_copy_only=False), dtype=bool)
    values = kinds.chunk(0) if kinds.num_chunks == 1 else kinds.combine_chunks()
    at = np.asarray(values.to_numpy())[piece.order[positions]]
    adds: np.ndarray = (at == RowKind.INSERT) | (at == RowKind.UPDATE_AFTER)
    return adds


def _first_row(piece: SortedSlice, config: MergeConfig) -> pa.Table:
    if config.ignore_delete:
        return piece.take(_group_pick(piece, _adds(piece), last=False)[1])
    _reject_retracts(piece, "first-row")
    return piece.take(piece.first_rows())


def _fill(piece: SortedSlice, column: str, mask: np.ndarray | None, last: bool) -> pa.Array:
    """Per group, ``column`` at the last (first) row in ``mask``; null where there is none."""
    groups, positions = _group_pick(piece, mask, last)
    return _by_group(piece, groups, piece.column(column).take(arrow_of(positions)))


def _with_inserts(base: pa.Table) -> pa.Table:
    return base.set_column(base.schema.get_field_index(VALUE_KIND_COLUMN), VALUE_KIND_COLUMN,
                           arrow_of(np.full(base.num_rows, RowKind.INSERT, np.int8)))


def _partial_update(piece: SortedSlice, config: MergeConfig, value_columns: Sequence[str]
                    ) -> pa.Table:
    if config.sequence_groups or not _adds(piece).all():
        return merge_rows(piece, config, value_columns)  # per key, in Python (Java's order)
    base = piece.take(piece.last_rows())
    for column in value_columns:
        mask = _valid_if_null(piece.column(column))
        if mask is None:  # no NULL: every key's newest value, which ``base`` holds
            continue
        merged = _fill(piece, column, mask, last=True)
        base = base.set_column(base.schema.get_field_index(column), column, merged)
    return _keep_lone_kinds(piece, _with_inserts(base))


def _keep_lone_kinds(piece: SortedSlice, base: pa.Table) -> pa.Table:
    """A lone version keeps its kind (+I or +U): Java passes it through unmerged."""
    lone = _lone(piece)
    if not lone.any():
        return base
    original = piece.column(VALUE_KIND_COLUMN).take(arrow_of(piece.last_rows()))
    index = base.schema.get_field_index(VALUE_KIND_COLUMN)
    return base.set_column(index, VALUE_KIND_COLUMN, pc_coalesce(
        base.column(VALUE_KIND_COLUMN).combine_chunks(), original, lone))


def _lone(piece: SortedSlice) -> np.ndarray:
    """Per key: has it a single version (which Java passes through unmerged)?"""
    return np.asarray(piece.ends - piece.first_rows() == 0, dtype=bool)


def _aggregate(piece: SortedSlice, config: MergeConfig, value_columns: Sequence[str]) -> pa.Table:
    adds = _adds(piece)
    lone = _lone(piece)
    retract = ~adds & ~lone[piece.group_ids]  # lone versions are never merged
    has_retract = bool(retract.any())
    if config.aggregation_remove_record_on_delete and has_retract:
        return merge_rows(piece, config, value_columns)
    newest = base = piece.take(piece.last_rows())
    row_columns = []
    for column in value_columns:
        function = config.aggregate_functions.get(column, "last_non_null_value")
        if function == "listagg" and column not in config.distinct:
            if has_retract and column not in config.ignore_retract:
                raise UnsupportedError(f"aggregate function 'listagg' (field {column}) cannot "
                                       "retract; set fields.<c>.ignore-retract")
            merged = _listagg(piece, column, config.list_agg_delimiters.get(column, ","),
                              ~retract if has_retract else None)
            if merged is not None:
                base = base.set_column(base.schema.get_field_index(column), column, merged)
                continue
        if function in ROW_FUNCTIONS:
            row_columns.append(column)
            continue
        rows_mask = None
        if has_retract and column in config.ignore_retract:
            rows_mask = ~retract
        elif has_retract and function not in _RETRACTABLE:
            raise UnsupportedError(f"aggregate function {function!r} (field {column}) cannot "
                                   "retract; set fields.<c>.ignore-retract")
        if function in _ARROW:
            merged = _arrow_aggregate(piece, piece.column(column), function, rows_mask,
                                      retract if has_retract and rows_mask is None else None)
        else:
            skip_nulls = _ORDERED.get(function, _FIRST.get(function, False))
            mask = _valid_if_null(piece.column(column)) if skip_nulls else None
            if function in _ORDERED and mask is None and not has_retract:
                continue  # every key's newest value, which ``base`` holds
            if rows_mask is not None:
                mask = rows_mask if mask is None else mask & rows_mask
            groups, positions = _group_pick(piece, mask, last=function not in _FIRST)
            values = piece.column(column).take(arrow_of(positions))
            if has_retract and rows_mask is None and function in ("last_value",
                                                                  "last_non_null_value"):
                # Java retract: last_value -> NULL; last_non_null_value -> NULL for a non-null
                values = pc.if_else(arrow_of(retract[positions]),
                                    pa.nulls(len(values), values.type), values)
            merged = _by_group(piece, groups, values)
        base = base.set_column(base.schema.get_field_index(column), column, merged)
    base = _with_inserts(base)
    if lone.any():  # lone versions stay as written (kind, and values of a -U/-D)
        original = newest
        restore = value_columns if not adds.all() else ()
        for name in (*restore, VALUE_KIND_COLUMN):
            if name not in row_columns:
                base = base.set_column(base.schema.get_field_index(name), name, pc_coalesce(
                    base.column(name).combine_chunks(), original.column(name), lone))
    if row_columns:
        base = merge_rows(piece, config, row_columns, base=base)
    return base


# Java Character.isWhitespace and Arrow's utf8_is_space differ on these: such text goes the
# per-key way (lsm/merge/row_merge.py)
_WHITESPACE_DIFFERS = "[\u00a0\u2007\u202f\u0085\u001c-\u001f]"


def _listagg(piece: SortedSlice, column: str, delimiter: str, mask: np.ndarray | None
             ) -> pa.Array | None:
    """listagg (no distinct) with Arrow kernels: per key, the non-blank values joined in
    order, NULL if none; None when the text needs Java's own whitespace test."""
    values = piece.column(column)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return None
    if pc.any(pc.match_substring_regex(values, _WHITESPACE_DIFFERS)).as_py():
        return None
    blank = pc.or_(pc.equal(pc.utf8_length(values), 0), pc.utf8_is_space(values))
    keep = _valid(values) & ~np.asarray(pc.fill_null(blank, True).to_numpy(zero_copy_only=False),
                                        dtype=bool)
    if mask is not None:
        keep &= mask
    data = pa.table({"g": arrow_of(piece.group_ids), "v": values}).filter(arrow_of(keep))
    grouped = data.group_by("g", use_threads=False).aggregate([("v", "list")])
    groups = np.asarray(grouped.column("g").combine_chunks().to_numpy())
    joined = pc.binary_join(grouped.column(1).combine_chunks(), delimiter)
    merged = _by_group(piece, groups, joined.cast(values.type))
    # a lone version keeps its value, blank or not (Java passes it through unmerged)
    return pc_coalesce(merged, values.take(arrow_of(piece.last_rows())), _lone(piece))


def _arrow_aggregate(piece: SortedSlice, column: pa.Array, function: str,
                     mask: np.ndarray | None, negate: np.ndarray | None) -> pa.Array:
    if negate is not None:  # sum: a retraction subtracts its value
        column = pc.if_else(arrow_of(negate), pc.negate_checked(column), column)
    data = pa.table({"g": arrow_of(piece.group_ids), "v": column})
    if mask is not None:
        data = data.filter(arrow_of(mask))
    grouped = data.group_by("g", use_threads=False).aggregate([("v", _ARROW[function])])
    groups = np.asarray(grouped.column("g").combine_chunks().to_numpy())
    out = _by_group(piece, groups, grouped.column(1).combine_chunks())
    return out.cast(column.type)


def make_reducer(config: MergeConfig, value_columns: Sequence[str], drop_deletes: bool) -> Reducer:
    """The reducer of a table's merge engine; drops -U/-D results when ``drop_deletes``."""
    check_supported(config)

    def reduce(piece: SortedSlice) -> pa.Table:
        if config.engine == "deduplicate":
            return _deduplicate(piece, config, drop_deletes)
        if config.engine == "first-row":
            out = _first_row(piece, config)
        elif config.engine == "partial-update":
            out = _partial_update(piece, config, value_columns)
        else:
            out = _aggregate(piece, config, value_columns)
        if drop_deletes:
            out = out.filter(is_add(out.column(VALUE_KIND_COLUMN)))
        return out

    return reduce
