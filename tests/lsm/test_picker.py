"""The compaction picker reproduces Paimon's picks (UniversalCompactionTest's scenarios,
ForceUpLevel0Compaction, pickFullCompaction, the manager's filters) exactly."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from paimond.format.meta.manifest import EMPTY_STATS, DataFileMeta
from paimond.lsm.levels import Levels, SortedRun
from paimond.lsm.picker import (
    PickerState,
    Trigger,
    create_unit,
    drop_deletes,
    pick_compaction,
    pick_force_level0,
    pick_full_compaction,
    pick_universal,
)
from paimond.table.options.compaction import CompactionOptions
from paimond.table.options.core import TableOptions
from paimond.table.options.reader import parse_duration_millis

_names = itertools.count()


def file(level: int, size_bytes: int, max_seq: int = 0) -> DataFileMeta:
    return DataFileMeta(
        file_name=f"data-{next(_names)}.parquet", file_size=size_bytes, row_count=1,
        min_key=b"", max_key=b"", key_stats=EMPTY_STATS, value_stats=EMPTY_STATS,
        min_sequence_number=max_seq, max_sequence_number=max_seq, schema_id=0, level=level,
        extra_files=(), creation_time_millis=0, delete_row_count=0, embedded_index=None,
        file_source=0, value_stats_cols=None, external_path=None, first_row_id=None,
        write_cols=None, write_cols_sequences=None)


def run(level: int, size_bytes: int) -> SortedRun:
    return SortedRun(level, (file(level, size_bytes),))


def level0(*sizes: int) -> list[SortedRun]:
    return [run(0, s) for s in sizes]


def options(max_amp: int, ratio: int, trigger: int, **extra: object) -> CompactionOptions:
    return CompactionOptions(num_sorted_run_trigger=trigger, max_size_amp_percent=max_amp,
                             size_ratio=ratio, **extra)  # type: ignore[arg-type]


def sizes(unit: object) -> list[int]:
    assert unit is not None
    return [f.file_size for f in unit.files]  # type: ignore[attr-defined]


STATE = PickerState()


@pytest.mark.parametrize("count, expected_output", [(1, 1), (2, 1), (3, 2), (4, 3), (5, 5)])
def test_output_level(count: int, expected_output: int) -> None:
    runs = [run(level, 1) for level in (0, 0, 1, 3, 4)]
    unit = create_unit(runs, 5, count, Trigger.RUN_COUNT, "test")
    assert unit.output_level == expected_output
    assert unit.output_level != 0


@pytest.mark.parametrize("runs, num_levels, trigger, expected_sizes", [
    (level0(1, 2, 3, 3), 3, Trigger.SIZE_AMP, [1, 2, 3, 3]),
    ([run(0, 1), run(1, 1), run(2, 1), run(3, 50)], 4, Trigger.SIZE_RATIO, [1, 1, 1]),
    ([run(0, 1), run(1, 2), run(2, 3), run(3, 50)], 4, Trigger.RUN_COUNT, [1, 2, 3]),
    ([run(0, 1), run(0, 1), run(1, 1), run(2, 50)], 3, Trigger.SIZE_RATIO, [1, 1, 1]),
    ([run(0, 1), run(0, 2), run(1, 3), run(2, 50)], 3, Trigger.RUN_COUNT, [1, 2, 3]),
])
def test_pick_rules(runs: list[SortedRun], num_levels: int, trigger: Trigger,
                    expected_sizes: list[int]) -> None:
    unit = pick_universal(runs, num_levels, options(25, 1, 3), STATE)
    assert sizes(unit) == expected_sizes
    assert unit is not None and unit.trigger == trigger and unit.reason


def test_run_count_pick_extends_into_level_2() -> None:
    runs = [run(0, 10), run(0, 20), run(1, 97), run(2, 100)]
    unit = pick_universal(runs, 3, options(200, 1, 3), STATE)
    assert unit is not None and len(unit.files) == 4 and unit.output_level == 2


def test_never_outputs_level_0() -> None:
    runs = level0(1, 1, 1, 1024, 1024 * 1024)
    unit = pick_universal(runs, 6, options(200, 1, 5), STATE)
    assert sizes(unit) == [1, 1, 1, 1024, 1024 * 1024]
    assert unit is not None and unit.output_level == 5


def _append_and_pick_size_amp(current: list[int]) -> list[int]:
    current = [1, *current]
    unit = pick_universal(level0(*current), 3, options(25, 0, 1), STATE)
    if unit is not None and unit.trigger == Trigger.SIZE_AMP:
        return [sum(sizes(unit))]
    return current


def test_size_amplification_sequence() -> None:
    expected = [[2], [3], [4], [1, 4], [6], [1, 6], [8], [1, 8], [1, 1, 8], [11], [1, 11],
                [1, 1, 11], [14], [1, 14], [1, 1, 14], [1, 1, 1, 14], [18]]
    current = [1]
    for step in expected:
        current = _append_and_pick_size_amp(current)
        assert current == step


def _size_ratio_only(opts: CompactionOptions, current: Sequence[int]) -> list[int]:
    runs = [run(i, s) for i, s in enumerate(current)]
    # Size amplification disabled (huge percent); the run-count rule never fires at len == trigger.
    unit = pick_universal(runs, len(current), opts, STATE)
    if unit is None:
        return list(current)
    picked = sizes(unit)
    rest = list(current)
    for s in picked:
        rest.remove(s)
    return [sum(picked), *rest]


def test_size_ratio_sequence() -> None:
    opts = options(10**9, 1, 5)
    expected = [[5], [1, 5], [1, 1, 5], [1, 1, 1, 5], [4, 5], [1, 4, 5], [1, 1, 4, 5],
                [3, 4, 5], [1, 3, 4, 5], [2, 3, 4, 5], [1, 2, 3, 4, 5], [16], [1, 16],
                [1, 1, 16], [1, 1, 1, 16], [4, 16], [1, 4, 16], [1, 1, 4, 16], [3, 4, 16],
                [1, 3, 4, 16], [2, 3, 4, 16], [1, 2, 3, 4, 16], [11, 16]]
    current = [1, 1, 1, 1]
    for step in expected:
        current = _size_ratio_only(opts, [1, *current])
        assert current == step


@pytest.mark.parametrize("ratio, expected", [(10, [8, 9, 10]), (20, [27])])
def test_size_ratio_threshold(ratio: int, expected: list[int]) -> None:
    # trigger 3 = len(runs): the size-ratio rule applies, the run-count rule (> trigger) does not.
    assert _size_ratio_only(options(10**9, ratio, 3), [8, 9, 10]) == expected


def test_offpeak_hours_raise_the_ratio_inside_the_window_only() -> None:
    opts = options(10**9, 10, 3, offpeak_start_hour=22, offpeak_end_hour=6, offpeak_ratio=10)
    runs = [run(0, 8), run(1, 9), run(2, 10)]
    inside = pick_universal(runs, 3, opts, PickerState(local_hour=23))
    outside = pick_universal(runs, 3, opts, PickerState(local_hour=12))
    assert sizes(inside) == [8, 9, 10]    # ratio 120%: 8 -> 17 -> 27 all absorbed
    assert outside is None                # ratio 110%: 8 * 1.1 < 9 stops before anything
    assert opts.offpeak_ratio_at(5) == 10 and opts.offpeak_ratio_at(6) == 0


def test_optimization_interval() -> None:
    opts = options(100, 1, 3, optimization_interval_ms=1000)
    runs = [run(0, 1), run(1, 3), run(2, 5)]
    first = pick_universal(runs, 3, opts, PickerState(now_millis=0))
    assert sizes(first) == [1, 3, 5] and first is not None and first.trigger == Trigger.EARLY_FULL
    assert pick_universal(runs, 3, opts, PickerState(now_millis=1001,
                                                     last_full_compaction_millis=0)) is not None
    assert pick_universal(runs, 3, opts, PickerState(now_millis=1001,
                                                     last_full_compaction_millis=1001)) is None
    amp = pick_universal([run(0, 3), run(1, 3), run(2, 5)], 3, opts,
                         PickerState(now_millis=1500, last_full_compaction_millis=1001))
    assert sizes(amp) == [3, 3, 5] and amp is not None and amp.covers_all_runs


def test_total_size_threshold() -> None:
    opts = options(100, 1, 3, total_size_threshold_bytes=10)
    assert sizes(pick_universal([run(0, 1), run(1, 3), run(2, 5)], 3, opts, STATE)) == [1, 3, 5]
    assert pick_universal([run(0, 2), run(1, 6), run(2, 10)], 3, opts, STATE) is None
    assert pick_universal([run(3, 5)], 3, opts, STATE) is None


def test_incremental_size_threshold() -> None:
    opts = options(10**9, 1, 10, incremental_size_threshold_bytes=5)
    assert pick_universal([run(0, 2), run(1, 2), run(2, 100)], 3, opts, STATE) is None
    unit = pick_universal([run(0, 3), run(1, 3), run(2, 100)], 3, opts, STATE)
    assert sizes(unit) == [3, 3, 100] and unit is not None and unit.output_level == 2


@pytest.mark.parametrize("runs, expected_sizes, expected_output", [
    (level0(1, 2, 2, 2), [1, 2, 2, 2], 2),
    ([run(0, 1), run(1, 2), run(2, 2)], [1, 2, 2], 2),
    ([run(0, 1), run(2, 2)], [1], 1),
])
def test_force_up_level0(runs: list[SortedRun], expected_sizes: list[int],
                         expected_output: int) -> None:
    opts = options(25, 1, 3, needs_lookup=True)
    unit = pick_compaction(runs, 3, opts, STATE)
    assert sizes(unit) == expected_sizes
    assert unit is not None and unit.output_level == expected_output


def test_gentle_lookup_mode_forces_every_interval_attempts() -> None:
    opts = options(25, 1, 5, needs_lookup=True, lookup_compact_max_interval=5)
    runs = [run(0, 2), run(1, 2), run(2, 2)]
    picks = [pick_compaction(runs, 3, opts, PickerState(force_l0_attempts=i)) for i in range(5)]
    assert picks[:4] == [None] * 4
    assert sizes(picks[4]) == [2, 2, 2] and picks[4] is not None and picks[4].output_level == 2


def test_force_level0_without_level0_files_picks_nothing() -> None:
    assert pick_force_level0([run(1, 5), run(2, 5)], 3, options(25, 1, 3), STATE) is None


def test_manager_filters_drop_a_single_file_already_at_its_level() -> None:
    opts = options(25, 1, 1, total_size_threshold_bytes=100)
    # Early full would pick [L2] alone -> output level 2 == its level -> filtered.
    assert pick_compaction([run(2, 5)], 3, opts, STATE) is None


def test_full_compaction() -> None:
    runs = [run(0, 1), run(1, 2), run(2, 3)]
    unit = pick_full_compaction(runs, 3, lambda f: False)
    assert sizes(unit) == [1, 2, 3] and unit is not None and unit.output_level == 2
    assert pick_full_compaction([], 3, lambda f: False) is None
    only_max = [SortedRun(2, (file(2, 7), file(2, 8)))]
    assert pick_full_compaction(only_max, 3, lambda f: False) is None
    with_dv = pick_full_compaction(only_max, 3, lambda f: f.file_size == 8)
    assert sizes(with_dv) == [8] and with_dv is not None and with_dv.file_rewrite
    assert sizes(pick_full_compaction(only_max, 3, lambda f: False, force_rewrite_all=True)) == [7, 8]


@pytest.mark.parametrize("output, highest, dv, keep, expected", [
    (0, 2, False, False, False), (2, 2, False, False, True), (1, 2, False, False, False),
    (1, 2, True, False, True), (2, 2, False, True, False), (3, 2, False, False, True),
])
def test_drop_deletes(output: int, highest: int, dv: bool, keep: bool, expected: bool) -> None:
    assert drop_deletes(output, highest, dv, keep) is expected


def test_levels_order_and_runs() -> None:
    newest, older, oldest = file(0, 1, max_seq=9), file(0, 1, max_seq=5), file(0, 1, max_seq=1)
    high = [file(3, 10), file(3, 20)]
    levels = Levels.from_files([older, *high, newest, oldest], 4, key_order=lambda f: f.file_size)
    assert levels.level0 == (newest, older, oldest)
    assert [(r.level, len(r.files)) for r in levels.sorted_runs()] == [(0, 1), (0, 1), (0, 1), (3, 2)]
    assert levels.non_empty_highest_level() == 3
    assert Levels.from_files([file(7, 1)], 6, key_order=lambda f: 0).num_levels == 8


def test_options_from_table_options() -> None:
    opts = TableOptions({
        "num-sorted-run.compaction-trigger": "4", "compaction.optimization-interval": "2 h",
        "compaction.total-size-threshold": "64 mb", "deletion-vectors.enabled": "true",
        "lookup-compact": "gentle"}).compaction
    assert opts.num_sorted_run_trigger == 4 and opts.num_levels == 5
    assert opts.optimization_interval_ms == 7_200_000
    assert opts.total_size_threshold_bytes == 64 << 20
    assert opts.needs_lookup and opts.lookup_compact_max_interval == 8
    assert TableOptions({}).compaction.needs_lookup is False
    assert parse_duration_millis("30 min") == 1_800_000
