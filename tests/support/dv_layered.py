"""A deletion-vector table with files on several levels (``layered``), and switching deletion
vectors on for a table written without them (``enable_vectors``)."""

from __future__ import annotations

import datetime
from pathlib import Path

from pypaimon.schema.schema_change import SchemaChange

from paimond.clock import SYSTEM_CLOCK, Clock
from paimond.maintenance.compact.job import CompactJob
from paimond.table.scan.snapshot_scan import scan_snapshot
from support.dv_scenarios import SCENARIOS, Live
from support.pypaimon_tables import catalog_for

NOW = datetime.datetime(2026, 11, 22, 12)


CLOCK = Clock(fixed_ms=int(NOW.timestamp() * 1000))  # its local time is NOW


def layered(tmp_path: Path) -> Live:
    """A deduplicate table, vectors off, with versions of keys in levels 4 and 5."""
    base = SCENARIOS[0]
    options = {k: v for k, v in base.options.items() if k != "deletion-vectors.enabled"}
    scenario = type(base)("rebuild", base.schema, base.keys, base.partition_keys,
                          options | {"compaction.force-up-level-0": "true"}, base.make,
                          retract=True)
    live = Live(scenario, str(tmp_path / "wh"))
    live.write(60)
    CompactJob(live.table, clock=SYSTEM_CLOCK, full=True, use_processes=False).run()
    live.write(40)
    CompactJob(live.table, use_processes=False, clock=CLOCK).run()
    latest = live.table.snapshots.latest()
    assert latest is not None
    levels = {lv for b in scan_snapshot(live.table, latest).buckets().values() for lv in b.levels}
    assert levels == {4, 5}, levels
    return live


def enable_vectors(live: Live) -> None:
    change = SchemaChange.set_option("deletion-vectors.enabled", "true")
    catalog_for(live.warehouse).alter_table(live.name, [change])
    assert live.table.options().deletion_vectors_enabled
