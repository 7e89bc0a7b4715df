"""Compaction options with Paimon's defaults (Java ``CoreOptions``, apache/paimon 5dacde516b).

Read from a table's raw options; everything a picker needs, parsed once, as plain data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from paimond.errors import UnsupportedError
from paimond.table.options import parse_duration_millis, parse_memory_size


@dataclass(frozen=True, slots=True)
class CompactionOptions:
    num_sorted_run_trigger: int = 5
    max_size_amp_percent: int = 200
    size_ratio: int = 1
    optimization_interval_ms: int | None = None
    total_size_threshold_bytes: int | None = None
    incremental_size_threshold_bytes: int | None = None
    offpeak_start_hour: int = -1
    offpeak_end_hour: int = -1
    offpeak_ratio: int = 0
    force_up_level0: bool = False
    needs_lookup: bool = False
    lookup_compact_max_interval: int | None = None  # gentle mode only
    force_rewrite_all_files: bool = False
    num_levels: int = 6

    @classmethod
    def from_options(cls, raw: Mapping[str, str]) -> CompactionOptions:
        def text(key: str) -> str | None:
            value = raw.get(key)
            return None if value is None else value.strip()

        def integer(key: str, default: int) -> int:
            value = text(key)
            try:
                return default if value is None else int(value)
            except ValueError:
                raise UnsupportedError(f"option {key}={value!r} is not an integer") from None

        def flag(key: str) -> bool:
            return (text(key) or "false").lower() == "true"

        def parsed(key: str, parse: Callable[[str], int]) -> int | None:
            value = text(key)
            if value is None:
                return None
            try:
                return parse(value)
            except ValueError:
                raise UnsupportedError(f"option {key}={value!r} is not valid") from None

        trigger = integer("num-sorted-run.compaction-trigger", 5)
        needs_lookup = (
            (text("merge-engine") or "").lower() == "first-row"
            or (text("changelog-producer") or "").lower() == "lookup"
            or flag("deletion-vectors.enabled") or flag("force-lookup"))
        gentle = (text("lookup-compact") or "radical").lower() == "gentle"
        max_interval = None
        if gentle:
            max_interval = max(trigger, integer("lookup-compact.max-interval", trigger * 2))
        return cls(
            num_sorted_run_trigger=trigger,
            max_size_amp_percent=integer("compaction.max-size-amplification-percent", 200),
            size_ratio=integer("compaction.size-ratio", 1),
            optimization_interval_ms=parsed("compaction.optimization-interval",
                                            parse_duration_millis),
            total_size_threshold_bytes=parsed("compaction.total-size-threshold",
                                              parse_memory_size),
            incremental_size_threshold_bytes=parsed("compaction.incremental-size-threshold",
                                                    parse_memory_size),
            offpeak_start_hour=integer("compaction.offpeak.start.hour", -1),
            offpeak_end_hour=integer("compaction.offpeak.end.hour", -1),
            offpeak_ratio=integer("compaction.offpeak-ratio", 0),
            force_up_level0=flag("compaction.force-up-level-0"),
            needs_lookup=needs_lookup,
            lookup_compact_max_interval=max_interval,
            force_rewrite_all_files=flag("compaction.force-rewrite-all-files"),
            num_levels=integer("num-levels", trigger + 1),
        )

    @property
    def has_early_full_compaction(self) -> bool:
        return (self.optimization_interval_ms is not None
                or self.total_size_threshold_bytes is not None
                or self.incremental_size_threshold_bytes is not None)

    def offpeak_ratio_at(self, hour: int) -> int:
        """Extra size ratio during off-peak hours [start, end), which may wrap midnight."""
        start, end = self.offpeak_start_hour, self.offpeak_end_hour
        if start == -1 or end == -1 or start == end:
            return 0
        inside = start <= hour < end if start < end else hour < end or start <= hour
        return self.offpeak_ratio if inside else 0
