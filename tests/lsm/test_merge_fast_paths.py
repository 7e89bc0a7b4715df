"""The merge's fast paths (packed integer sort, presorted slices, kinds read as numpy) give
what the general path gives, and what a plain Python model of deduplicate gives, on
randomized runs: equal keys across runs, sequence ties, -U/-D rows, NULL keys."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from paimond.format.binary.key_order import sort_key_function
from paimond.format.types.data_types import BigIntType
from paimond.lsm.merge import engines as merge_engines
from paimond.lsm.merge import streaming as merge
from paimond.lsm.merge.engines import make_reducer
from paimond.lsm.merge.streaming import merge_sorted_runs, stable_int_order
from paimond.table.options.merge import MergeConfig

KEY = ["_KEY_k"]
SORT_KEY = sort_key_function([BigIntType()])
Row = tuple[Any, int, int, str]  # key (None: NULL), sequence, kind, value


@pytest.mark.parametrize("seed", range(6))
def test_stable_int_order_is_a_stable_argsort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cases = [rng.integers(-40, 40, 500), rng.integers(0, 1 << 40, 3000),
             rng.integers(-(1 << 63), (1 << 63) - 1, 700, dtype=np.int64),  # too wide: argsort
             rng.integers(0, 1 << 64, 300, dtype=np.uint64),
             rng.integers(0, 60, 400).astype(np.uint64), rng.integers(-100, 100, 256).astype(np.int8),
             rng.integers(0, 9, 1).astype(np.int32), np.empty(0, np.int64)]
    for keys in cases:
        order, sorted_keys = stable_int_order(keys)
        expected = np.argsort(keys, kind="stable")
        assert order.tolist() == expected.tolist()
        assert sorted_keys.tolist() == keys[expected].tolist()


def _runs(rng: random.Random, nulls: bool, wide: bool, sequences: str = "random"
          ) -> list[list[Row]]:
    """Runs with unique keys each; keys repeat across runs; sequence numbers repeat
    (ties) and are not monotone within a run. ``sequences``: "random" over one range for
    every run; "disjoint": run i draws from its own range (level-0 files), the runs in random
    order; "touching": the same, but each range ends where the next one starts (a tie)."""
    span = (1 << 62) if wide else 60
    keys = [rng.randrange(-span, span) for _ in range(80)]
    count = rng.randint(1, 6)
    lows = rng.sample(range(count), count)
    runs = []
    for index in range(count):
        chosen: list[Any] = sorted(set(rng.sample(keys, rng.randint(0, 40))))
        if nulls and rng.random() < 0.5:
            chosen.insert(0, None)
        low, high = 0, 29
        if sequences != "random":
            low = 10 * lows[index]
            high = low + (10 if sequences == "touching" else 9)
        runs.append([(k, rng.randint(low, high), rng.choice((0, 0, 0, 1, 2, 3)),
                      f"v{rng.random():.6f}") for k in chosen])
    return runs


def _batches(rows: list[Row], batch_rows: int) -> Iterator[pa.RecordBatch]:
    table = pa.table({
        "_KEY_k": pa.array([r[0] for r in rows], pa.int64()),
        "_SEQUENCE_NUMBER": pa.array([r[1] for r in rows], pa.int64()),
        "_VALUE_KIND": pa.array([r[2] for r in rows], pa.int8()),
        "v": pa.array([r[3] for r in rows], pa.string()),
    })
    yield from table.to_batches(max_chunksize=batch_rows)


def _merged(runs: list[list[Row]], drop: bool, slice_rows: int, batch_rows: int) -> list[tuple[Any, ...]]:
    reducer = make_reducer(MergeConfig(), ["v"], drop)
    pieces = list(merge_sorted_runs([_batches(r, batch_rows) for r in runs], KEY, SORT_KEY,
                                    reducer, slice_rows=slice_rows))
    if not pieces:
        return []
    table = pa.concat_tables(pieces)
    return list(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


def _model(runs: list[list[Row]], drop: bool) -> list[Row]:
    """Newest version per key by (sequence, addition after retraction), a full tie won by
    the later run; retractions dropped when ``drop``."""
    newest: dict[Any, tuple[tuple[int, bool, int], Row]] = {}
    for index, run in enumerate(runs):
        for row in run:
            rank = (row[1], row[2] in (0, 2), index)
            if row[0] not in newest or rank > newest[row[0]][0]:
                newest[row[0]] = (rank, row)
    rows = [r for _, r in newest.values() if not (drop and r[2] in (1, 3))]
    return sorted(rows, key=lambda r: (r[0] is not None, r[0] if r[0] is not None else 0))


def _general(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route every slice through the full sort and the Arrow kinds test."""
    monkeypatch.setattr(merge, "_presorted", lambda *args: None)

    def adds_at(piece: merge.SortedSlice, positions: np.ndarray) -> np.ndarray:
        kinds = piece.rows.column(merge.VALUE_KIND_COLUMN).take(
            pa.array(piece.order[positions]))
        return np.asarray(merge.is_add(kinds).to_numpy(zero_copy_only=False), dtype=bool)

    monkeypatch.setattr(merge_engines, "_adds_at", adds_at)


@pytest.mark.parametrize("seed", range(60))
def test_fast_paths_equal_the_general_path_and_the_model(seed: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    runs = _runs(rng, nulls=seed % 3 == 0, wide=seed % 4 == 1,
                 sequences=("random", "disjoint", "touching")[seed % 3])
    slice_rows, batch_rows = rng.choice((4, 16, 1 << 18)), rng.choice((3, 7, 1000))
    fast = {drop: _merged(runs, drop, slice_rows, batch_rows) for drop in (False, True)}
    for drop in (False, True):
        assert fast[drop] == _model(runs, drop)
    with monkeypatch.context() as patched:
        _general(patched)
        for drop in (False, True):
            assert _merged(runs, drop, slice_rows, batch_rows) == fast[drop]


def test_disjoint_sequence_ranges_skip_the_check_only_when_they_are_disjoint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of runs whose sequence ranges ascend without overlap are taken as sorted; a
    shared endpoint (a possible tie) or a NULL sequence is checked as before."""
    seen: list[bool] = []
    presorted = merge._presorted

    def spy(rows: pa.Table, key_columns: list[str], disjoint: bool = False) -> Any:
        seen.append(disjoint)
        return presorted(rows, key_columns, disjoint)

    monkeypatch.setattr(merge, "_presorted", spy)

    def piece(keys: list[int], sequences: list[int | None]) -> pa.Table:
        return pa.table({"_KEY_k": pa.array(keys, pa.int64()),
                         "_SEQUENCE_NUMBER": pa.array(sequences, pa.int64()),
                         "_VALUE_KIND": pa.array([0] * len(keys), pa.int8())})

    newer, older = piece([1, 2, 3], [7, 5, 6]), piece([2, 3, 4], [1, 4, 2])
    sorted_slice = merge.sort_slice([newer, older], KEY)
    assert seen == [True]
    keys = sorted_slice.rows.column("_KEY_k").take(pa.array(sorted_slice.order)).to_pylist()
    sequences = sorted_slice.column("_SEQUENCE_NUMBER").to_pylist()
    assert list(zip(keys, sequences, strict=True)) == [(1, 7), (2, 1), (2, 5), (3, 4), (3, 6),
                                                       (4, 2)]
    merge.sort_slice([newer, piece([2, 3, 4], [1, 5, 2])], KEY)  # 5 in both ranges
    merge.sort_slice([newer, piece([2, 3, 4], [1, None, 2])], KEY)
    assert seen == [True, False, False]


def test_pieces_of_batches_with_disjoint_sequences_are_not_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges holding each piece's sequence numbers (its batch's) order the pieces and skip
    the check when they are disjoint; overlapping ranges fall back to the pieces' own."""
    read: list[int] = []
    own_range = merge._sequence_range

    def spy(table: pa.Table) -> Any:
        read.append(table.num_rows)
        return own_range(table)

    monkeypatch.setattr(merge, "_sequence_range", spy)

    def piece(keys: list[int], sequences: list[int]) -> pa.Table:
        return pa.table({"_KEY_k": pa.array(keys, pa.int64()),
                         "_SEQUENCE_NUMBER": pa.array(sequences, pa.int64()),
                         "_VALUE_KIND": pa.array([0] * len(keys), pa.int8())})

    newer, older = piece([1, 2, 3], [7, 5, 6]), piece([2, 3, 4], [1, 4, 2])
    expected = [(1, 7), (2, 1), (2, 5), (3, 4), (3, 6), (4, 2)]

    def merged(bounds: list[tuple[int, int] | None] | None) -> list[tuple[int, int]]:
        sorted_slice = merge.sort_slice([newer, older], KEY, (), bounds)
        keys = sorted_slice.rows.column("_KEY_k").take(pa.array(sorted_slice.order)).to_pylist()
        return list(zip(keys, sorted_slice.column("_SEQUENCE_NUMBER").to_pylist(), strict=True))

    assert merged([(5, 9), (0, 4)]) == expected and read == []
    assert merged([(5, 9), (0, 5)]) == expected and read == [3, 3]  # overlap: pieces read
    assert merged([(5, 9), None]) == expected and read == [3, 3, 3, 3]
    assert merged(None) == expected and len(read) == 6
