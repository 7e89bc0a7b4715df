"""The set-wise key lookup of deletion-vector compaction, against a brute-force model."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap

from paimond.format.binary.binary_row import encode_manifest_row
from paimond.format.meta.manifest import EMPTY_STATS, DataFileMeta
from paimond.format.types.data_types import IntType, VarCharType
from paimond.lsm.lookup.deletion_vectors import BucketDeletionVectors, deleted_positions, filter_deleted
from paimond.lsm.lookup.key_lookup import ScanKeyIndex, find_superseded, rows_at, wanted_keys

KEY_TYPES = [VarCharType(nullable=False, length=2147483647), IntType(nullable=False)]
KEYS = ["_KEY_k1", "_KEY_k2"]


def _meta(name: str, keys: list[tuple[str, int]]) -> DataFileMeta:
    return DataFileMeta(
        file_name=name, file_size=1, row_count=len(keys),
        min_key=encode_manifest_row(list(min(keys)), KEY_TYPES),
        max_key=encode_manifest_row(list(max(keys)), KEY_TYPES), key_stats=EMPTY_STATS,
        value_stats=EMPTY_STATS, min_sequence_number=0, max_sequence_number=0, schema_id=0, level=1,
        extra_files=(), creation_time_millis=0, delete_row_count=0, embedded_index=None,
        file_source=0, value_stats_cols=None, external_path=None, first_row_id=None,
        write_cols=None, write_cols_sequences=None)


def _table(keys: list[tuple[str, int]]) -> pa.Table:
    return pa.table({KEYS[0]: [k[0] for k in keys], KEYS[1]: [k[1] for k in keys]})


keys_strategy = st.lists(st.tuples(st.sampled_from("abcde"), st.integers(-5, 5)),
                         min_size=1, max_size=30, unique=True)


@given(files=st.lists(keys_strategy, min_size=1, max_size=4),
       wanted=st.lists(st.tuples(keys_strategy, st.integers(0, 3)), min_size=1, max_size=3),
       deleted_seed=st.integers(0, 2**32 - 1))
def test_find_superseded_matches_brute_force(files: list[list[tuple[str, int]]],
                                             wanted: list[tuple[list[tuple[str, int]], int]],
                                             deleted_seed: int) -> None:
    files = [sorted(f) for f in files]
    metas = [_meta(f"f{i}", keys) for i, keys in enumerate(files)]
    contents = {m.file_name: keys for m, keys in zip(metas, files, strict=True)}
    rng = np.random.default_rng(deleted_seed)
    deleted = {m.file_name: np.flatnonzero(rng.random(m.row_count) < 0.3) for m in metas}

    def read_keys(meta: DataFileMeta) -> Iterator[pa.RecordBatch]:
        yield from _table(contents[meta.file_name]).to_batches(max_chunksize=7)

    index = ScanKeyIndex(read_keys, KEYS)
    table = wanted_keys(((_table(keys), tag) for keys, tag in wanted), KEYS)
    found = find_superseded(metas, table, KEYS, KEY_TYPES, index, deleted.__getitem__)

    tag_of: dict[tuple[str, int], int] = {}
    for keys, tag in wanted:
        for key in keys:
            tag_of[key] = min(tag, tag_of.get(key, tag))
    expected = {}
    for meta in metas:
        positions = [p for p, key in enumerate(contents[meta.file_name])
                     if key in tag_of and p not in set(deleted[meta.file_name].tolist())]
        if positions:
            expected[meta.file_name] = (positions,
                                        [tag_of[contents[meta.file_name][p]] for p in positions])
    got = {s.meta.file_name: (s.positions.tolist(), s.tags.tolist()) for s in found}
    assert got == expected
    assert index.files_read <= len(metas)


def test_files_outside_the_wanted_key_range_are_not_read() -> None:
    metas = [_meta("low", [("a", 1), ("b", 2)]), _meta("high", [("x", 1), ("y", 2)])]
    read: list[str] = []

    def read_keys(meta: DataFileMeta) -> Iterator[pa.RecordBatch]:
        read.append(meta.file_name)
        keys = [("a", 1), ("b", 2)] if meta.file_name == "low" else [("x", 1), ("y", 2)]
        yield from _table(keys).to_batches()

    wanted = wanted_keys([(_table([("y", 2)]), 0)], KEYS)
    found = find_superseded(metas, wanted, KEYS, KEY_TYPES, ScanKeyIndex(read_keys, KEYS),
                            lambda name: np.empty(0, np.int64))
    assert read == ["high"]
    assert [(s.meta.file_name, s.positions.tolist()) for s in found] == [("high", [1])]


@given(sizes=st.lists(st.integers(0, 20), min_size=1, max_size=5),
       seed=st.integers(0, 2**32 - 1))
def test_filter_deleted_and_rows_at_use_file_positions(sizes: list[int], seed: int) -> None:
    total = sum(sizes)
    values = np.arange(total)
    batches, start = [], 0
    for size in sizes:
        batches.append(pa.record_batch({"x": values[start:start + size]}))
        start += size
    rng = np.random.default_rng(seed)
    deleted = np.flatnonzero(rng.random(total) < 0.4).astype(np.int64)
    kept = [v for b in filter_deleted(iter(batches), deleted) for v in b.column(0).to_pylist()]
    assert kept == [v for v in range(total) if v not in set(deleted.tolist())]
    taken = rows_at(iter(batches), deleted)
    assert (taken.column(0).to_pylist() if taken is not None else []) == deleted.tolist()


def test_bucket_vectors_track_changes() -> None:
    vectors = BucketDeletionVectors({"a": BitMap([1, 2])}, bitmap64=False, base=None)
    vectors.mark("a", np.array([2], dtype=np.int64))
    assert not vectors.changed  # already deleted
    vectors.mark("b", np.array([0, 5], dtype=np.int64))
    assert vectors.changed
    assert deleted_positions(vectors.vector_of("b")).tolist() == [0, 5]
    vectors.remove("a")
    assert set(vectors.vectors()) == {"b"}
