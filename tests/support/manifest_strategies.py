"""Hypothesis strategies for manifest entries, their statistics and the avro codecs."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from paimond.format.meta.manifest import (
    DataFileMeta,
    ManifestEntry,
    SimpleStats,
)

i32 = st.integers(-(2**31), 2**31 - 1)


i64 = st.integers(-(2**63), 2**63 - 1)


names = st.text(max_size=12)


blobs = st.binary(max_size=40)


def opt(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | s


def tuples(s: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(s, max_size=4).map(tuple)


stats_st = st.builds(SimpleStats, blobs, blobs, opt(tuples(opt(i64))))


file_st = st.builds(
    DataFileMeta, names, i64, i64, blobs, blobs, stats_st, stats_st, i64, i64, i64, i32,
    tuples(names), opt(i64), opt(i64), opt(blobs), opt(i32), opt(tuples(names)), opt(names),
    opt(i64), opt(tuples(names)), opt(tuples(i64)))


entry_st = st.builds(ManifestEntry, st.sampled_from([0, 1]), blobs, i32, i32, file_st)


codecs = st.sampled_from(["zstd", "null", "deflate", "snappy", "bzip2", "xz"])
