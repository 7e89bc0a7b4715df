"""The changelog reducer (lsm/merge/changelog.py) on hand-built runs, record by record against
Java's wrappers: ``LookupChangelogMergeFunctionWrapper`` over ``LookupMergeFunction`` and
``FullChangelogMergeFunctionWrapper``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from paimond.format.binary.key_order import sort_key_function
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import BigIntType, DataField, IntType
from paimond.format.types.row_kind import RowKind
from paimond.lsm.merge.changelog import FULL, LOOKUP, ChangelogMode, ChangelogReducer, with_level
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.streaming import merge_sorted_runs
from paimond.table.options.merge import MergeConfig

INS, UB, UA, D = RowKind.INSERT, RowKind.UPDATE_BEFORE, RowKind.UPDATE_AFTER, RowKind.DELETE
KEY = ["_KEY_k"]


def _schema(options: dict[str, str]) -> TableSchema:
    fields = (DataField(0, "k", IntType(nullable=False)), DataField(1, "v", BigIntType()))
    return TableSchema(id=0, fields=fields, highest_field_id=1, partition_keys=(),
                       primary_keys=("k",), options=options)


def _run(level: int, rows: list[tuple[int, int, int, Any]]) -> list[pa.RecordBatch]:
    """(key, sequence, kind, v) rows of one sorted run at ``level``."""
    batch = pa.RecordBatch.from_pydict({
        "_KEY_k": pa.array([r[0] for r in rows], pa.int32()),
        "_SEQUENCE_NUMBER": pa.array([r[1] for r in rows], pa.int64()),
        "_VALUE_KIND": pa.array([r[2] for r in rows], pa.int8()),
        "k": pa.array([r[0] for r in rows], pa.int32()),
        "v": pa.array([r[3] for r in rows], pa.int64())})
    return [with_level(batch, level)]


def _merge(options: dict[str, str], mode: ChangelogMode, runs: list[list[pa.RecordBatch]],
           drop_deletes: bool = True) -> tuple[list[tuple[int, int, Any]], list[tuple[int, int,
                                                                                      int, Any]]]:
    schema = _schema(options)
    reducer = ChangelogReducer(make_reducer(MergeConfig.of(schema), schema.field_names, False),
                               mode, drop_deletes)
    merged, changelog = [], []
    for table in merge_sorted_runs([iter(r) for r in runs], KEY, sort_key_function([IntType()]),
                                   reducer):
        merged += [(r["k"], r["_VALUE_KIND"], r["v"]) for r in table.to_pylist()]
        found = reducer.take_changelog()
        if found is not None:
            changelog += [(r["_VALUE_KIND"], r["k"], r["_SEQUENCE_NUMBER"], r["v"])
                          for r in found.to_pylist()]
    return merged, changelog


def test_lookup_deduplicate_every_kind_of_change() -> None:
    """k1 updated (-U old +U new), k2 deleted (-D old), k3 new (+I), k4 only above (nothing),
    k5 deleted while absent (nothing)."""
    above = _run(2, [(1, 1, INS, 10), (2, 2, INS, 20), (4, 4, INS, 40)])
    level0 = _run(0, [(1, 5, UA, 11), (2, 6, D, None), (3, 7, INS, 30), (5, 8, D, None)])
    merged, changelog = _merge({}, ChangelogMode(LOOKUP, 5), [level0, above])
    assert merged == [(1, UA, 11), (3, INS, 30), (4, INS, 40)]
    assert changelog == [(UB, 1, 1, 10), (UA, 1, 5, 11), (D, 2, 2, 20), (INS, 3, 7, 30)]


def test_lookup_merges_only_the_lowest_higher_version() -> None:
    """Java's LookupMergeFunction: a stale version deeper down is not merged (a sum would
    count it twice); the lowest one is "before"."""
    options = {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
    deep, low = _run(4, [(1, 1, INS, 5)]), _run(1, [(1, 2, INS, 7)])
    level0 = _run(0, [(1, 3, INS, 1), (1, 4, INS, 2)][:1])
    merged, changelog = _merge(options, ChangelogMode(LOOKUP, 5), [level0, low, deep])
    assert merged == [(1, INS, 8)]
    assert changelog == [(UB, 1, 2, 7), (UA, 1, 3, 8)]


def test_lookup_row_deduplicate_leaves_out_equal_values() -> None:
    above = _run(3, [(1, 1, INS, 10), (2, 2, INS, 20)])
    level0 = _run(0, [(1, 5, UA, 10), (2, 6, UA, 21)])
    _, changelog = _merge({}, ChangelogMode(LOOKUP, 5, ("k", "v")), [level0, above])
    assert changelog == [(UB, 2, 2, 20), (UA, 2, 6, 21)]
    _, unfiltered = _merge({}, ChangelogMode(LOOKUP, 5), [level0, above])
    assert len(unfiltered) == 4  # without row-deduplicate an equal update is emitted


def test_full_compaction_rules() -> None:
    """A lone max-level version is no change, even an equal rewrite of it is one (-U/+U
    without row-deduplicate); a lone new addition is +I, a lone new retraction nothing."""
    top = _run(5, [(1, 1, INS, 10), (2, 2, INS, 20), (3, 3, INS, 30)])
    newer = _run(0, [(2, 5, UA, 20), (3, 6, D, None), (4, 7, INS, 40), (6, 8, D, None)])
    merged, changelog = _merge({}, ChangelogMode(FULL, 5), [newer, top])
    assert merged == [(1, INS, 10), (2, UA, 20), (4, INS, 40)]
    assert changelog == [(UB, 2, 2, 20), (UA, 2, 5, 20), (D, 3, 3, 30), (INS, 4, 7, 40)]
    _, deduplicated = _merge({}, ChangelogMode(FULL, 5, ("k", "v")), [newer, top])
    assert deduplicated == [(D, 3, 3, 30), (INS, 4, 7, 40)]
