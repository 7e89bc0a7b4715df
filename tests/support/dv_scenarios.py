"""Key-value tables with deletion vectors written by pypaimon (``SCENARIOS``) and ``Live``, a
table being written, compacted and checked against its model row by row."""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

from paimond.clock import Clock
from paimond.maintenance.compact.job import CompactionSummary, CompactJob
from paimond.maintenance.execution import LookupCacheSettings
from paimond.table.catalog import Table, open_table
from paimond.table.scan.snapshot_scan import scan_snapshot
from paimond.table.storage.interface import open_storage
from support.pypaimon_tables import (
    MergeModel,
    TableWriter,
    catalog_for,
    not_null,
    random_changes,
    seeded_rng,
    sort_rows,
)

NOW = datetime.datetime(2026, 11, 22, 12)


CLOCK = Clock(fixed_ms=int(NOW.timestamp() * 1000))  # its local time is NOW


Row = dict[str, Any]


class _SequencedModel(MergeModel):
    """Deduplicate with `sequence.field=ts`: per key the record with the greatest ts wins
    (the later on a tie), retractions included; a winning retraction deletes the key."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.newest: dict[tuple[Any, ...], Row] = {}

    def apply(self, row: Row) -> None:
        key = tuple(row[k] for k in self.keys)
        old = self.newest.get(key)
        if old is not None and row["ts"] < old["ts"]:
            return
        self.newest[key] = dict(row)
        if row.get("rk") in ("-U", "-D"):
            self.state.pop(key, None)
        else:
            self.state[key] = dict(row)

    def forget_deletes(self) -> None:
        """Compaction into a level >= 1 of a DV table drops the winning retractions: a
        later record of the key, whatever its ts, finds nothing to lose against."""
        self.newest = {k: r for k, r in self.newest.items() if k in self.state}


@dataclass(frozen=True)
class Scenario:
    name: str
    schema: pa.Schema
    keys: tuple[str, ...]
    partition_keys: tuple[str, ...]
    options: dict[str, str]
    make: Callable[[random.Random], Row]
    retract: bool
    aggregates: dict[str, str] | None = None
    sequenced: bool = False


def _value(rng: random.Random) -> Row:
    return {"v": f"v{rng.randrange(1000)}", "ts": rng.randrange(5)}


def _partial(rng: random.Random) -> Row:
    return {"a": rng.choice([None, "x", "y"]), "b": rng.choice([None, rng.randrange(100)])}


def _aggregate(rng: random.Random) -> Row:
    return {"total": rng.randrange(-20, 50), "hi": rng.randrange(1000),
            "amount": Decimal(rng.randrange(-10**4, 10**4)).scaleb(-2)}


_KEYED = pa.schema([not_null("dt", pa.string()), not_null("id", pa.int32()),
                    ("v", pa.string()), ("ts", pa.int32()), ("rk", pa.string())])


_DV = {"deletion-vectors.enabled": "true", "bucket": "2"}


SCENARIOS = [
    Scenario("dedup", _KEYED, ("dt", "id"), ("dt",), _DV | {"file.format": "parquet"},
             _value, retract=True),
    Scenario("dedup_seq", _KEYED, ("dt", "id"), ("dt",),
             _DV | {"file.format": "orc", "sequence.field": "ts"}, _value, retract=True,
             sequenced=True),
    Scenario("partial", pa.schema([not_null("id", pa.int64()), ("a", pa.string()),
                                   ("b", pa.int32()), ("rk", pa.string())]), ("id",), (),
             _DV | {"file.format": "avro", "merge-engine": "partial-update"}, _partial,
             retract=False),
    Scenario("aggregate", pa.schema([not_null("id", pa.int32()), ("total", pa.int64()),
                                     ("hi", pa.int32()), ("amount", pa.decimal128(12, 2)),
                                     ("rk", pa.string())]), ("id",), (),
             _DV | {"file.format": "parquet", "merge-engine": "aggregation",
                    "fields.total.aggregate-function": "sum",
                    "fields.hi.aggregate-function": "max",
                    "fields.amount.aggregate-function": "sum"}, _aggregate, retract=False,
             aggregates={"total": "sum", "hi": "max", "amount": "sum"}),
    # Not a DV table, but read the same way (level 0 skipped, higher files unmerged): the
    # level-0 keys found above must be dropped, the older row staying first.
    Scenario("first_row", _KEYED, ("dt", "id"), ("dt",),
             {"bucket": "2", "file.format": "parquet", "merge-engine": "first-row",
              "ignore-delete": "true"}, _value, retract=True),
]


class Live:
    """A scenario's table, its pypaimon writer and the model of what it holds."""

    def __init__(self, scenario: Scenario, warehouse: str) -> None:
        self.scenario, self.warehouse = scenario, warehouse
        self.name = f"db.dv_{scenario.name}"
        options = {"rowkind.field": "rk"} | scenario.options
        self.writer = TableWriter(catalog_for(warehouse), self.name, scenario.schema,
                              primary_keys=scenario.keys, partition_keys=scenario.partition_keys,
                              options=options)
        model_type = _SequencedModel if scenario.sequenced else MergeModel
        self.model = model_type(options.get("merge-engine", "deduplicate"), scenario.keys,
                                scenario.aggregates)
        self.rng = seeded_rng(self.name)
        if scenario.partition_keys:
            self.pool = [(d, i) for d in ("a", "b") for i in range(40)]
        else:
            self.pool = [(i,) for i in range(60)]
        self.table: Table = open_table(open_storage(warehouse), warehouse, self.name)

    def write(self, count: int) -> None:
        self.writer.commit(random_changes(self.rng, self.model, self.pool, count, self.scenario.make,
                                    retract=self.scenario.retract))

    def expected(self) -> pa.Table:
        rows = pa.Table.from_pylist(self.model.rows(), schema=self.writer.read_schema)
        return sort_rows(rows, self.scenario.keys)

    def compact(self, *, full: bool = False, cache: LookupCacheSettings | None = None
                ) -> list[CompactionSummary]:
        """Compact until no level-0 file is left (a pick may leave some for the next)."""
        summaries = []
        for _ in range(6):
            job = CompactJob(self.table, full=full, use_processes=False,
                             parallelism=2, clock=CLOCK, lookup_cache=cache)
            summaries.append(job.run())
            assert not summaries[-1].failures, summaries[-1].describe()
            if not self.level0_files():
                if isinstance(self.model, _SequencedModel):
                    self.model.forget_deletes()
                return summaries
        raise AssertionError(f"{self.name}: level-0 files left after 6 compactions")

    def level0_files(self) -> int:
        latest = self.table.snapshots.latest()
        assert latest is not None
        return sum(len(b.levels.get(0, ())) for b in scan_snapshot(self.table, latest)
                   .buckets().values())
