"""Key order and interval partitioning of compaction inputs."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from paimond.format.binary.binary_row import encode_manifest_row
from paimond.format.binary.key_order import sort_key_function
from paimond.format.meta.manifest import EMPTY_STATS, DataFileMeta
from paimond.format.types.data_types import DoubleType, IntType, VarCharType
from paimond.lsm.interval_partition import partition_intervals

KEY = [IntType()]
_names = itertools.count()


def file(low: int, high: int) -> DataFileMeta:
    return DataFileMeta(
        file_name=f"f{next(_names)}", file_size=1, row_count=1,
        min_key=encode_manifest_row([low], KEY), max_key=encode_manifest_row([high], KEY),
        key_stats=EMPTY_STATS, value_stats=EMPTY_STATS, min_sequence_number=0,
        max_sequence_number=0, schema_id=0, level=0, extra_files=(), creation_time_millis=0,
        delete_row_count=0, embedded_index=None, file_source=0, value_stats_cols=None,
        external_path=None, first_row_id=None, write_cols=None, write_cols_sequences=None)


def _range(meta: DataFileMeta) -> tuple[int, int]:
    return int.from_bytes(meta.min_key[12:16], "little", signed=True), int.from_bytes(
        meta.max_key[12:16], "little", signed=True)


def test_key_order_matches_paimon() -> None:
    key = sort_key_function([IntType(), VarCharType(length=10), DoubleType()])
    rows = [(1, "b", 0.0), (None, "z", 1.0), (1, "a", float("nan")), (1, "a", -0.0),
            (1, None, 5.0), (0, "é", 2.0), (1, "a", 0.0), (1, "a", -math.inf)]
    ordered = sorted(rows, key=key)
    assert ordered[0] == (None, "z", 1.0)
    assert ordered[1] == (0, "é", 2.0)
    assert ordered[2] == (1, None, 5.0)
    assert [r[2] for r in ordered[3:7]][:3] == [-math.inf, -0.0, 0.0]
    assert math.isnan(ordered[6][2]) and ordered[7] == (1, "b", 0.0)


def test_sections_and_runs() -> None:
    a, b, c, d = file(1, 5), file(3, 8), file(6, 7), file(10, 12)
    sections = partition_intervals([d, c, b, a], KEY)
    assert [sorted(_range(f) for f in s.files) for s in sections] == [
        [(1, 5), (3, 8), (6, 7)], [(10, 12)]]
    first = sections[0]
    assert sorted(tuple(_range(f) for f in run) for run in first.runs) == [
        ((1, 5), (6, 7)), ((3, 8),)]


@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 20)), min_size=1, max_size=30))
def test_partition_invariants(ranges: list[tuple[int, int]]) -> None:
    files = [file(low, low + width) for low, width in ranges]
    sections = partition_intervals(files, KEY)
    assert sorted(f.file_name for s in sections for f in s.files) == sorted(
        f.file_name for f in files)
    spans = [(min(_range(f)[0] for f in s.files), max(_range(f)[1] for f in s.files))
             for s in sections]
    assert all(prev[1] < nxt[0] for prev, nxt in zip(spans, spans[1:], strict=False))
    for section in sections:
        for run in section.runs:
            assert all(_range(x)[1] < _range(y)[0] for x, y in zip(run, run[1:], strict=False))
