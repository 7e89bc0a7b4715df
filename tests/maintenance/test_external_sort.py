"""The external sort of a sort compaction against the in-memory sort it replaces when a
partition outgrows the memory budget: the same rows, in the same key order, for each
strategy, whether the input spills into 1, a few or many runs; and the spill files are gone
afterwards, also when the reader stops early."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyarrow as pa
import pytest

from paimond.format.types.data_types import (
    BigIntType,
    DataField,
    DoubleType,
    IntType,
    VarCharType,
)
from paimond.maintenance.compact.external_sort import SortOrder, sorted_batches
from paimond.maintenance.compact.sort_order import sort_key_column

FIELDS = (DataField(0, "a", IntType()), DataField(1, "b", BigIntType()),
          DataField(2, "s", VarCharType(length=50)), DataField(3, "v", DoubleType()))


def _rows(count: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({
        "a": pa.array([rng.choice([None, *range(-5, 40)]) for _ in range(count)], pa.int32()),
        "b": pa.array([rng.randint(-10**12, 10**12) for _ in range(count)], pa.int64()),
        "s": pa.array([rng.choice([None, "", "x", "abc", "zz", "é"]) for _ in range(count)]),
        "v": pa.array([rng.random() for _ in range(count)], pa.float64()),
    })


def _keys(table: pa.Table, order: SortOrder) -> list[object]:
    if order.strategy == "order":
        return list(zip(*(table.column(c).to_pylist() for c in order.columns), strict=True))
    return sort_key_column(table, FIELDS, order.strategy, order.columns).to_pylist()


@pytest.mark.parametrize("strategy, columns", [
    ("order", ("a", "s")), ("order", ("s", "b")), ("zorder", ("a", "b")),
    ("zorder", ("s", "a")), ("hilbert", ("a", "b"))])
@pytest.mark.parametrize("budget_kb", [4, 40, 10_000])
def test_the_external_sort_orders_as_the_in_memory_sort(
        strategy: str, columns: tuple[str, ...], budget_kb: int, tmp_path: Path) -> None:
    rows = _rows(3000, seed=len(columns) * 7 + budget_kb)
    order = SortOrder(strategy, columns, FIELDS)
    expected = order.in_memory(rows)

    got = pa.Table.from_batches(list(sorted_batches(rows.to_batches(250), order,
                                                    budget_kb * 1024, 500, str(tmp_path))))

    assert got.schema == rows.schema
    assert _keys(got, order) == _keys(expected, order)
    assert sorted(got.to_pylist(), key=repr) == sorted(rows.to_pylist(), key=repr)
    assert all(b.num_rows <= 500 for b in got.to_batches())
    assert os.listdir(tmp_path) == []  # spill files removed


def test_spill_files_go_when_the_reader_stops_early(tmp_path: Path) -> None:
    rows = _rows(2000, seed=3)
    order = SortOrder("order", ("b",), FIELDS)
    stream = sorted_batches(rows.to_batches(100), order, 8 * 1024, 100, str(tmp_path))
    first = next(stream)
    assert 0 < first.num_rows <= 100 and os.listdir(tmp_path)  # runs on disk meanwhile
    stream.close()
    assert os.listdir(tmp_path) == []
