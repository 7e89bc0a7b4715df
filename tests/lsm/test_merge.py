"""The streaming merge and merge engines against a plain Python model of Paimon's semantics."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paimond.errors import UnsupportedError
from paimond.format.binary.key_order import sort_key_function
from paimond.format.meta.schema import TableSchema
from paimond.format.types.data_types import BigIntType, DataField, IntType, VarCharType
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.streaming import merge_sorted_runs
from paimond.table.options.merge import MergeConfig

KEY = ["_KEY_k"]
SORT_KEY = sort_key_function([IntType()])
Row = tuple[int, int, int, Any, Any]  # key, seq, kind, v (int), s (str)


def _schema(options: dict[str, str]) -> TableSchema:
    fields = (DataField(0, "k", IntType(nullable=False)), DataField(1, "v", BigIntType()),
              DataField(2, "s", VarCharType(length=100)))
    return TableSchema(id=0, fields=fields, highest_field_id=2, partition_keys=(),
                       primary_keys=("k",), options=options)


def _batches(rows: list[Row], batch_rows: int) -> Iterator[pa.RecordBatch]:
    table = pa.table({
        "_KEY_k": pa.array([r[0] for r in rows], pa.int32()),
        "_SEQUENCE_NUMBER": pa.array([r[1] for r in rows], pa.int64()),
        "_VALUE_KIND": pa.array([r[2] for r in rows], pa.int8()),
        "k": pa.array([r[0] for r in rows], pa.int32()),
        "v": pa.array([r[3] for r in rows], pa.int64()),
        "s": pa.array([r[4] for r in rows], pa.string()),
    })
    yield from table.to_batches(max_chunksize=batch_rows)


def _merge(runs: list[list[Row]], options: dict[str, str], drop: bool, batch_rows: int) -> list[tuple]:
    reducer = make_reducer(MergeConfig.of(_schema(options)), ["k", "v", "s"], drop)
    out = merge_sorted_runs([_batches(r, batch_rows) for r in runs], KEY, SORT_KEY, reducer)
    pieces = list(out)
    if not pieces:
        return []
    table = pa.concat_tables(pieces)
    return list(zip(*(table.column(c).to_pylist() for c in ("_KEY_k", "_SEQUENCE_NUMBER",
                                                            "_VALUE_KIND", "v", "s")), strict=True))


@st.composite
def _runs(draw: st.DrawFn, kinds: tuple[int, ...] = (0, 1, 2, 3)) -> list[list[Row]]:
    """Runs of unique keys each, with globally unique sequence numbers."""
    run_count = draw(st.integers(1, 5))
    seqs = iter(draw(st.permutations(range(run_count * 40))))
    runs = []
    for _ in range(run_count):
        keys = sorted(draw(st.sets(st.integers(0, 30), max_size=20)))
        runs.append([(k, next(seqs), draw(st.sampled_from(kinds)),
                      draw(st.none() | st.integers(-5, 5)), draw(st.none() | st.sampled_from("abc")))
                     for k in keys])
    return runs


def _versions(runs: list[list[Row]]) -> dict[int, list[Row]]:
    by_key: dict[int, list[Row]] = {}
    for row in sorted((r for run in runs for r in run), key=lambda r: r[1]):
        by_key.setdefault(row[0], []).append(row)
    return by_key


@given(_runs(), st.booleans(), st.integers(1, 7))
def test_deduplicate(runs: list[list[Row]], drop: bool, batch_rows: int) -> None:
    expected = [v[-1] for _, v in sorted(_versions(runs).items())]
    if drop:
        expected = [r for r in expected if r[2] in (0, 2)]
    assert _merge(runs, {}, drop, batch_rows) == expected


@given(_runs(), st.integers(1, 7))
def test_deduplicate_ignore_delete(runs: list[list[Row]], batch_rows: int) -> None:
    expected = []
    for _, versions in sorted(_versions(runs).items()):
        adds = [r for r in versions if r[2] in (0, 2)]
        if adds:
            expected.append(adds[-1])
    assert _merge(runs, {"ignore-delete": "true"}, False, batch_rows) == expected


@given(_runs(kinds=(0, 2)), st.integers(1, 7))
def test_first_row(runs: list[list[Row]], batch_rows: int) -> None:
    expected = [v[0] for _, v in sorted(_versions(runs).items())]
    assert _merge(runs, {"merge-engine": "first-row"}, True, batch_rows) == expected


@given(_runs(kinds=(0, 2)), st.integers(1, 7))
def test_partial_update(runs: list[list[Row]], batch_rows: int) -> None:
    expected = []
    for key, versions in sorted(_versions(runs).items()):
        v = s = None
        for row in versions:
            v = row[3] if row[3] is not None else v
            s = row[4] if row[4] is not None else s
        kind = versions[0][2] if len(versions) == 1 else 0  # a lone version is kept as is
        expected.append((key, versions[-1][1], kind, v, s))
    assert _merge(runs, {"merge-engine": "partial-update"}, True, batch_rows) == expected


@given(_runs(), st.integers(1, 7))
def test_aggregation_sum_with_retractions_and_last_non_null(runs: list[list[Row]],
                                                            batch_rows: int) -> None:
    options = {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
    expected = []
    for key, versions in sorted(_versions(runs).items()):
        if len(versions) == 1:  # Java passes a lone version through unmerged
            if versions[0][2] in (0, 2):
                expected.append(versions[0])
            continue
        total = None
        s = None
        for row in versions:
            add = row[2] in (0, 2)
            if row[3] is not None:
                total = (total or 0) + (row[3] if add else -row[3])
            if add:
                s = row[4] if row[4] is not None else s
            elif row[4] is not None:  # last_non_null_value retracts a non-null to NULL
                s = None
        expected.append((key, versions[-1][1], 0, total, s))
    assert _merge(runs, options, True, batch_rows) == expected


@pytest.mark.parametrize("function, pick", [("max", max), ("min", min)])
def test_aggregation_min_max(function: str, pick: Any) -> None:
    rng = random.Random(3)
    runs = [[(k, run * 100 + k, 0, rng.randint(-9, 9), "x") for k in range(10)] for run in range(4)]
    merged = _merge(runs, {"merge-engine": "aggregation", "fields.v.aggregate-function": function},
                    True, 3)
    assert [m[3] for m in merged] == [pick(run[k][3] for run in runs) for k in range(10)]


def test_unsupported_engine_features_fail_before_merging() -> None:
    with pytest.raises(UnsupportedError, match="'my_udf' \\(field s\\)"):  # a custom function
        make_reducer(MergeConfig.of(_schema({"merge-engine": "aggregation",
                                             "fields.s.aggregate-function": "my_udf"})),
                     ["k", "v", "s"], True)
    with pytest.raises(UnsupportedError, match="cannot merge -U/-D"):  # two versions merge
        _merge([[(1, 1, 0, 1, "a")], [(1, 2, 3, 1, "a")]], {"merge-engine": "partial-update"},
               True, 2)
    # a lone -D is passed through unmerged, as Java's ReducerMergeFunctionWrapper does
    assert _merge([[(1, 1, 3, 1, "a")]], {"merge-engine": "partial-update"}, False, 2) == [
        (1, 1, 3, 1, "a")]


@settings(max_examples=20)
@given(st.integers(1, 4))
def test_many_small_batches_keep_memory_per_run(batch_rows: int) -> None:
    # 8 runs x 200 keys; the merge yields many pieces, each sorted, together complete.
    runs = [[(k, run * 1000 + k, 0, run, None) for k in range(run, 200, 2)] for run in range(8)]
    reducer = make_reducer(MergeConfig.of(_schema({})), ["k", "v", "s"], True)
    pieces = list(merge_sorted_runs([_batches(r, batch_rows) for r in runs], KEY, SORT_KEY, reducer))
    keys = [k for p in pieces for k in p.column("_KEY_k").to_pylist()]
    assert keys == sorted(set(keys)) and len(keys) == 200
    assert len(pieces) > 10


@st.composite
def _runs_with_tied_sequences(draw: st.DrawFn) -> list[list[Row]]:
    """Runs whose sequence numbers repeat across runs (and may run backwards)."""
    runs = []
    for _ in range(draw(st.integers(1, 5))):
        keys = sorted(draw(st.sets(st.integers(0, 12), max_size=10)))
        runs.append([(k, draw(st.integers(0, 3)), draw(st.sampled_from((0, 1, 2, 3))),
                      draw(st.integers(-5, 5)), None) for k in keys])
    return runs


@given(_runs_with_tied_sequences(), st.booleans(), st.integers(1, 7))
def test_deduplicate_orders_ties_like_java(runs: list[list[Row]], drop: bool, batch_rows: int) -> None:
    # Versions by sequence, a retraction before an addition on the same sequence; rows equal
    # in both keep the order of the runs.
    expected = []
    for key in sorted({r[0] for run in runs for r in run}):
        versions = [r for run in runs for r in run if r[0] == key]
        newest = sorted(versions, key=lambda r: (r[1], r[2] in (0, 2)))[-1]
        if not drop or newest[2] in (0, 2):
            expected.append(newest)
    assert _merge(runs, {}, drop, batch_rows) == expected


def test_merge_of_runs_in_sequence_order_and_out_of_it_agree() -> None:
    # Oldest run first lets the merge skip the full sort; the newest first needs it.
    rng = random.Random(11)
    runs = [[(k, run * 1000 + k, rng.choice((0, 1, 2, 3)), run, None)
             for k in sorted(rng.sample(range(300), 120))] for run in range(6)]
    forward = _merge(runs, {}, True, 16)
    assert forward == _merge(runs[::-1], {}, True, 16)
    newest = {r[0]: r for run in runs for r in run}  # later runs overwrite
    assert forward == [r for _, r in sorted(newest.items()) if r[2] in (0, 2)]


@settings(max_examples=20)
@given(st.integers(1, 50), st.integers(2, 8))
def test_a_slice_holds_at_most_a_batch_per_run(batch_rows: int, run_count: int) -> None:
    # Memory is bounded by runs x batch size, whatever the length of the runs.
    runs = [[(k, run * 10_000 + k, 0, run, None) for k in range(run, 3000, run_count)]
            for run in range(run_count)]
    sizes: list[int] = []
    reduce = make_reducer(MergeConfig.of(_schema({})), ["k", "v", "s"], True)

    def measuring(piece: Any) -> pa.Table:
        sizes.append(piece.num_rows)
        return reduce(piece)

    out = list(merge_sorted_runs([_batches(r, batch_rows) for r in runs], KEY, SORT_KEY, measuring))
    assert sum(p.num_rows for p in out) == 3000
    assert max(sizes) <= run_count * batch_rows


@given(st.lists(st.dictionaries(st.tuples(st.integers(0, 3), st.none() | st.sampled_from("abc")),
                                st.sampled_from((0, 1, 2, 3)), max_size=10), min_size=1, max_size=4),
       st.integers(1, 5), st.integers(2, 64))
def test_deduplicate_on_a_composite_key_with_nulls(runs: list[dict[tuple[int, str | None], int]],
                                                   batch_rows: int, slice_rows: int) -> None:
    # The generic path: keys compared through sort_key, sorted by Arrow (NULL first).
    seq = iter(range(1000))
    tables = []
    for run in runs:
        rows = sorted(((k, next(seq), kind) for k, kind in run.items()),
                      key=lambda r: (r[0][0], r[0][1] is not None, r[0][1] or ""))
        tables.append(pa.table({
            "_KEY_a": pa.array([r[0][0] for r in rows], pa.int32()),
            "_KEY_b": pa.array([r[0][1] for r in rows], pa.string()),
            "_SEQUENCE_NUMBER": pa.array([r[1] for r in rows], pa.int64()),
            "_VALUE_KIND": pa.array([r[2] for r in rows], pa.int8())}))
    newest: dict[tuple[int, str | None], tuple[int, int]] = {}
    for table in tables:
        for a, b, s, kind in zip(*(c.to_pylist() for c in table.columns), strict=True):
            newest[(a, b)] = (s, kind)  # later runs have higher sequence numbers
    expected = [(a, b, s) for (a, b), (s, kind) in sorted(
        newest.items(), key=lambda i: (i[0][0], i[0][1] is not None, i[0][1] or ""))
        if kind in (0, 2)]
    reducer = make_reducer(MergeConfig(), [], True)
    out = merge_sorted_runs([iter(t.to_batches(max_chunksize=batch_rows)) for t in tables[::-1]],
                            ["_KEY_a", "_KEY_b"], sort_key_function([IntType(), VarCharType(length=10)]),
                            reducer, slice_rows=slice_rows)
    merged = [(a, b, s) for t in out for a, b, s in zip(
        *(t.column(c).to_pylist() for c in ("_KEY_a", "_KEY_b", "_SEQUENCE_NUMBER")), strict=True)]
    assert merged == expected


@settings(max_examples=20)
@given(st.integers(1, 300), st.integers(1, 6))
def test_a_slice_holds_at_most_slice_rows(slice_rows: int, run_count: int) -> None:
    runs = [[(k, run * 10_000 + k, 0, run, None) for k in range(run, 2000, run_count)]
            for run in range(run_count)]
    sizes: list[int] = []
    reduce = make_reducer(MergeConfig.of(_schema({})), ["k", "v", "s"], True)

    def measuring(piece: Any) -> pa.Table:
        sizes.append(piece.num_rows)
        return reduce(piece)

    out = list(merge_sorted_runs([_batches(r, 500) for r in runs], KEY, SORT_KEY, measuring,
                                 slice_rows=slice_rows))
    assert sum(p.num_rows for p in out) == 2000
    assert max(sizes) <= max(slice_rows, run_count)
