"""Which sorted runs of a bucket to compact, and into which level.

Java ``UniversalCompaction``, ``EarlyFullCompaction``, ``OffPeakHours``,
``ForceUpLevel0Compaction``, ``CompactStrategy.pickFullCompaction`` and the filters of
``MergeTreeCompactManager.triggerCompaction`` (apache/paimon 5dacde516b). Unlike Java, picking
is a pure function: the clock, the local hour and what Java keeps in memory between picks
(the last full compaction, gentle-mode attempts) come in a :class:`PickerState`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from paimond.format.meta.manifest import DataFileMeta
from paimond.lsm.levels import SortedRun
from paimond.table.options.compaction import CompactionOptions


class Trigger(str, Enum):
    EARLY_FULL = "early_full"
    SIZE_AMP = "size_amp"
    SIZE_RATIO = "size_ratio"
    RUN_COUNT = "run_count"
    FORCE_L0 = "force_l0"
    FULL = "full"


@dataclass(frozen=True, slots=True)
class CompactUnit:
    """A picked unit: a contiguous newest prefix of the runs (or, for a full pick of a lone
    max-level run, the files that must be rewritten in place)."""

    output_level: int
    files: tuple[DataFileMeta, ...]
    trigger: Trigger
    reason: str
    covers_all_runs: bool = False
    file_rewrite: bool = False


@dataclass(frozen=True, slots=True)
class PickerState:
    local_hour: int = 0
    now_millis: int = 0
    last_full_compaction_millis: int | None = None
    force_l0_attempts: int = 0  # gentle lookup mode: empty universal picks since the last force


def _unit(runs: Sequence[SortedRun], output_level: int, trigger: Trigger, reason: str,
          total_runs: int) -> CompactUnit:
    files = tuple(f for run in runs for f in run.files)
    return CompactUnit(output_level, files, trigger, reason, len(runs) == total_runs)


def create_unit(runs: Sequence[SortedRun], max_level: int, count: int, trigger: Trigger,
                 reason: str) -> CompactUnit:
    """Output one level below the next untouched run; never level 0; all runs -> max level."""
    if count == len(runs):
        output = max_level
    else:
        output = max(0, runs[count].level - 1)
    if output == 0:
        while count < len(runs):
            count += 1
            if runs[count - 1].level != 0:
                output = runs[count - 1].level
                break
    if count == len(runs):
        output = max_level
    return _unit(runs[:count], output, trigger, reason, len(runs))


def _pick_for_size_ratio(runs: Sequence[SortedRun], max_level: int, options: CompactionOptions,
                         state: PickerState, count: int, trigger: Trigger,
                         force: bool = False) -> CompactUnit | None:
    size = sum(run.size_bytes for run in runs[:count])
    triggered = force or count > 1
    ratio = 100 + options.size_ratio + options.offpeak_ratio_at(state.local_hour)
    for run in runs[count:]:
        if size * ratio / 100.0 < run.size_bytes and (not triggered or run.level > 1):
            break
        size += run.size_bytes
        count += 1
        triggered = True
    if not triggered:
        return None
    reason = (f"{count} newest runs ({size} bytes) grow within size ratio "
              f"{options.size_ratio}% of each next run")
    return create_unit(runs, max_level, count, trigger, reason)


def _early_full(runs: Sequence[SortedRun], max_level: int, options: CompactionOptions,
                state: PickerState) -> CompactUnit | None:
    if len(runs) <= 1 or not options.has_early_full_compaction:
        return None
    interval = options.optimization_interval_ms
    last = state.last_full_compaction_millis
    if interval is not None and (last is None or state.now_millis - last > interval):
        reason = f"no full compaction in the last {interval} ms"
        return _unit(runs, max_level, Trigger.EARLY_FULL, reason, len(runs))
    total = sum(run.size_bytes for run in runs)
    threshold = options.total_size_threshold_bytes
    if threshold is not None and total < threshold:
        reason = f"bucket size {total} bytes is below compaction.total-size-threshold"
        return _unit(runs, max_level, Trigger.EARLY_FULL, reason, len(runs))
    incremental = sum(run.size_bytes for run in runs if run.level != max_level)
    threshold = options.incremental_size_threshold_bytes
    if threshold is not None and incremental > threshold:
        reason = f"{incremental} bytes above the max level exceed the incremental threshold"
        return _unit(runs, max_level, Trigger.EARLY_FULL, reason, len(runs))
    return None


def _size_amp(runs: Sequence[SortedRun], max_level: int,
              options: CompactionOptions) -> CompactUnit | None:
    if len(runs) < options.num_sorted_run_trigger:
        return None
    newer = sum(run.size_bytes for run in runs[:-1])
    oldest = runs[-1].size_bytes
    if newer * 100 > options.max_size_amp_percent * oldest:
        reason = (f"size amplification: {newer} bytes above the oldest run's {oldest} bytes "
                  f"exceed {options.max_size_amp_percent}%")
        return _unit(runs, max_level, Trigger.SIZE_AMP, reason, len(runs))
    return None


def pick_universal(runs: Sequence[SortedRun], num_levels: int, options: CompactionOptions,
                   state: PickerState) -> CompactUnit | None:
    """Universal compaction: early full, size amplification, size ratio, then run count."""
    max_level = num_levels - 1
    unit = _early_full(runs, max_level, options, state) or _size_amp(runs, max_level, options)
    if unit is not None:
        return unit
    if len(runs) >= options.num_sorted_run_trigger:
        unit = _pick_for_size_ratio(runs, max_level, options, state, 1, Trigger.SIZE_RATIO)
        if unit is not None:
            return unit
    if len(runs) > options.num_sorted_run_trigger:
        count = len(runs) - options.num_sorted_run_trigger + 1
        unit = _pick_for_size_ratio(runs, max_level, options, state, count, Trigger.RUN_COUNT)
        if unit is not None:
            reason = (f"{len(runs)} sorted runs exceed num-sorted-run.compaction-trigger "
                      f"{options.num_sorted_run_trigger}; " + unit.reason)
            return CompactUnit(unit.output_level, unit.files, unit.trigger, reason,
                               unit.covers_all_runs)
    return None


def pick_force_level0(runs: Sequence[SortedRun], num_levels: int, options: CompactionOptions,
                      state: PickerState) -> CompactUnit | None:
    """Push every level-0 file up (readers of lookup, DV and first-row tables skip level 0)."""
    count = 0
    while count < len(runs) and runs[count].level == 0:
        count += 1
    if count == 0:
        return None
    return _pick_for_size_ratio(runs, num_levels - 1, options, state, count, Trigger.FORCE_L0,
                                force=True)


def _strategy_pick(runs: Sequence[SortedRun], num_levels: int, options: CompactionOptions,
                   state: PickerState) -> tuple[CompactUnit | None, int]:
    """The pick and the gentle-mode attempts after it: an attempt counts when universal picks
    nothing, and the ``interval``-th one forces level 0 up and starts the count again."""
    unit = pick_universal(runs, num_levels, options, state)
    attempts = state.force_l0_attempts
    if unit is not None or not (options.needs_lookup or options.force_up_level0):
        return unit, attempts
    interval = options.lookup_compact_max_interval if options.needs_lookup else None
    if interval is not None:
        attempts += 1
        if attempts < interval:
            return None, attempts  # gentle mode: force only every `interval` attempts
        attempts = 0
    return pick_force_level0(runs, num_levels, options, state), attempts


def pick_step(runs: Sequence[SortedRun], num_levels: int, options: CompactionOptions,
              state: PickerState) -> tuple[CompactUnit | None, PickerState]:
    """A normal (minor) pick, with the manager's filters (no empty unit, no unit that is a
    single file already at its output level), and the state the bucket's next pick starts
    from."""
    unit, attempts = _strategy_pick(runs, num_levels, options, state)
    after = dataclasses.replace(state, force_l0_attempts=attempts)
    if unit is None or not unit.files:
        return None, after
    if len(unit.files) == 1 and unit.files[0].level == unit.output_level:
        return None, after
    return unit, after


def pick_compaction(runs: Sequence[SortedRun], num_levels: int, options: CompactionOptions,
                    state: PickerState) -> CompactUnit | None:
    """:func:`pick_step` without the next state."""
    return pick_step(runs, num_levels, options, state)[0]


def pick_full_compaction(runs: Sequence[SortedRun], num_levels: int,
                         must_rewrite: Callable[[DataFileMeta], bool],
                         force_rewrite_all: bool = False) -> CompactUnit | None:
    """A forced full compaction. A lone max-level run rewrites only the files that
    ``must_rewrite`` names (those with a deletion vector or expired records), or all of them
    with ``force_rewrite_all``."""
    max_level = num_levels - 1
    if not runs:
        return None
    if len(runs) == 1 and runs[0].level == max_level:
        files = tuple(f for f in runs[0].files if force_rewrite_all or must_rewrite(f))
        if not files:
            return None
        return CompactUnit(max_level, files, Trigger.FULL,
                           f"rewrite {len(files)} max-level files in place", True, True)
    return _unit(runs, max_level, Trigger.FULL, "full compaction of every run", len(runs))


def drop_deletes(output_level: int, non_empty_highest_level: int, dv_enabled: bool,
                 force_keep_delete: bool = False) -> bool:
    """Whether merged -U/-D records may be dropped: no older data can exist below the output."""
    return (not force_keep_delete and output_level != 0
            and (output_level >= non_empty_highest_level or dv_enabled))
