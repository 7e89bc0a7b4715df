"""Expiration over random histories (writes, compactions, metadata-only upgrades, manifest
merges, tags, consumers) and random retention settings: after every run, no file a kept
snapshot or tag needs is gone and no file that nothing needs is left (nothing leaks); kept
snapshots are the contiguous newest ones, at least ``retain_min`` of them, and never one a
consumer still reads."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from support.table_history import History, assert_exactly_referenced, write_consumer

from paimond.clock import Clock
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.manifests import ManifestMergeJob
from paimond.table.scan.snapshot_scan import scan_snapshot

OPS = st.sampled_from(["write", "write", "write", "compact", "compact", "upgrade", "tag",
                       "merge", "expire", "expire"])
EXPIRE = st.tuples(
    st.integers(1, 4),  # retain_min
    st.integers(0, 6),  # retain_max - retain_min
    st.sampled_from([0, 0, 0, 60, 150, 400]),  # time retained, seconds
    st.integers(1, 8),  # max deletes
    st.one_of(st.none(), st.none(), st.integers(0, 8)),  # consumer at latest - k
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, History]:
    # Small manifests and a low merge count so that commits merge manifests too.
    warehouse = str(tmp_path_factory.mktemp("history") / "wh")
    return warehouse, History.create(warehouse, {"manifest.merge-min-count": "3"})


def _expire(history: History, params: tuple[int, int, int, int, int | None]) -> None:
    retain_min, extra, retained_s, max_deletes, consumer_back = params
    table = history.table
    before = table.snapshots.list_ids()
    latest = before[-1]
    consumer = None if consumer_back is None else max(1, latest - consumer_back)
    consumer_dir = Path(table.path) / "consumer"
    shutil.rmtree(consumer_dir, ignore_errors=True)
    if consumer is not None:
        write_consumer(table, "c", consumer)
    expire_settings = ExpireSettings(retain_min=retain_min, retain_max=retain_min + extra,
                                     time_retained_ms=retained_s * 1000, max_deletes=max_deletes)
    clock = Clock(fixed_ms=history.clock_ms + 30_000)
    result = ExpireJob(table, clock=clock, settings=expire_settings).run()
    event(f"deleted {'some' if result.deleted.total_files else 'no'} files, kinds "
          f"{sorted(result.deleted.files)}")
    after = table.snapshots.list_ids()
    assert after == list(range(after[0], latest + 1)), "kept snapshots are the newest, contiguous"
    assert len(after) >= min(retain_min, len(before))
    if consumer is not None:
        assert set(before) & set(range(consumer, latest + 1)) <= set(after)
    assert table.snapshots.read_hint("EARLIEST") in (after[0], None)
    assert_exactly_referenced(table)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(OPS, st.integers(1, 3), st.integers(1, 200), EXPIRE),
                    min_size=6, max_size=24), seed=st.integers(0, 2**16))
def test_expiration_keeps_exactly_what_is_referenced(
        pristine: tuple[str, History], tmp_path_factory: pytest.TempPathFactory,
        ops: list[tuple[str, int, int, tuple[int, int, int, int, int | None]]], seed: int) -> None:
    source, template = pristine
    warehouse = str(tmp_path_factory.mktemp("example") / "wh")
    shutil.copytree(source, warehouse)
    history = template.reopen(warehouse)
    rng = random.Random(seed)
    for op, files, advance_s, expire_params in ops:
        if op == "write":
            history.write(rng, files, advance_s * 1000)
        elif op == "compact":
            history.compact(rng, advance_s * 1000)
        elif op == "upgrade":
            history.upgrade(rng, advance_s * 1000)
        elif op == "tag":
            history.tag_latest()
        elif op == "merge":
            history.clock_ms += advance_s * 1000
            ManifestMergeJob(history.table, clock=Clock(fixed_ms=history.clock_ms)).run()
        else:
            _expire(history, expire_params)
    _expire(history, (1, 0, 0, 50, None))  # then everything but the latest goes
    latest = history.table.snapshots.latest()
    assert latest is not None and scan_snapshot(history.table, latest).files
