"""Compaction options with Paimon's defaults (Java ``CoreOptions``, apache/paimon 5dacde516b).

Everything a picker needs, as plain data; ``TableOptions.compaction`` reads them from a
table's options.
"""

from __future__ import annotations

from dataclasses import dataclass


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
