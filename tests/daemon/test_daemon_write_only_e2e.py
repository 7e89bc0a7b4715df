"""Writers with ``write-only=true`` and paimond doing the rest, over eight simulated days.

Each day a pypaimon writer commits three times into that day's partition of a date-partitioned
primary-key table whose options ask for everything a write-only writer no longer does:
partition expiry after 3 days, daily process-time tags (two kept), consumer expiry after a day,
snapshot retention 2..5. An idle consumer is left from day 1; an active one follows the latest
snapshot. After each day the daemon (at its defaults, with an injected clock one hour after the
day's last commit) runs one pass. Checked after every pass against a model of the rows: the
latest read, every snapshot the pass committed (each reads as the content before the partition
drop or after it), every retained tag (the content of its snapshot), the limits (no expired
partition left, at most two tags, named by consecutive days, the idle consumer gone, at most
five snapshots) and the metrics of each duty.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from pathlib import Path

import pyarrow as pa
from prometheus_client import CollectorRegistry
from pypaimon import Schema
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import catalog_for, sort_rows

from paimond.clock import Clock
from paimond.config.settings import load_settings
from paimond.daemon.lifecycle import Lifecycle
from paimond.daemon.metrics import Metrics
from paimond.daemon.service import Daemon
from paimond.maintenance.jobs import ROUTINE
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
from paimond.table.tags import list_tags

NAME = "db.events"
SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False),
                    pa.field("id", pa.int32(), nullable=False), pa.field("v", pa.string())])
OPTIONS = {
    "bucket": "1", "write-only": "true",
    "partition.expiration-time": "3 d", "partition.timestamp-formatter": "yyyyMMdd",
    "tag.automatic-creation": "process-time", "tag.creation-period": "daily",
    "tag.num-retained-max": "2", "sink.process-time-zone": "UTC",
    "consumer.expiration-time": "1 d",
    "snapshot.num-retained.min": "2", "snapshot.num-retained.max": "5",
    "snapshot.time-retained": "1 h",
}
DAYS = [datetime.date(2024, 1, 1) + datetime.timedelta(days=d) for d in range(8)]
HOUR_MS = 3_600_000
# run-once's full pass also runs the regenerating jobs (nothing to regenerate: success)
DUTIES = ("rebuild_dv", "compact", "rewrite_index", "expire_partitions", "tags",
          "expire_consumers", "expire", "merge_manifests")


@dataclasses.dataclass(frozen=True, slots=True)
class SteppingClock(Clock):
    """Wall time the test moves (``now_ms[0]``)."""

    now_ms: list[int] = dataclasses.field(default_factory=lambda: [0])

    def wall_ms(self) -> int:
        return self.now_ms[0]

    def local_now(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.now_ms[0] / 1000)


def _utc_ms(day: datetime.date, hour: int) -> int:
    moment = datetime.datetime(day.year, day.month, day.day, hour, tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


class Ingestion:
    """The write-only writer, and the model of what the table holds."""

    def __init__(self, warehouse: str) -> None:
        catalog = catalog_for(warehouse)
        catalog.create_database("db", True)
        catalog.create_table(NAME, Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], primary_keys=["dt", "id"], options=OPTIONS), False)
        self.py_table = catalog.get_table(NAME)
        self.table = open_table(open_storage(warehouse), warehouse, NAME)
        self.rows: dict[tuple[str, int], str] = {}  # the model: (dt, id) -> v

    def commit(self, day: datetime.date, round_: int, time_ms: int) -> int:
        dt = day.strftime("%Y%m%d")
        batch = [{"dt": dt, "id": i, "v": f"{dt}-{round_}"} for i in range(3)]
        builder = self.py_table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        try:
            write.write_arrow(pa.Table.from_pylist(batch, schema=SCHEMA))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()
        snapshot_id = self.table.snapshots.latest_id()
        assert snapshot_id is not None
        path = Path(self.table.snapshots.path(snapshot_id))
        path.write_text(json.dumps(json.loads(path.read_text()) | {"timeMillis": time_ms}))
        self.rows.update({(r["dt"], r["id"]): r["v"] for r in batch})
        return snapshot_id

    def drop_expired(self, now: datetime.datetime) -> None:
        """Java's values-time rule: a partition whose date is before now - 3 days goes."""
        cutoff = now - datetime.timedelta(days=3)
        self.rows = {k: v for k, v in self.rows.items()
                     if datetime.datetime.strptime(k[0], "%Y%m%d") >= cutoff}

    def content(self) -> pa.Table:
        rows = [{"dt": dt, "id": i, "v": v} for (dt, i), v in sorted(self.rows.items())]
        return sort_rows(pa.Table.from_pylist(rows, schema=SCHEMA), ["dt", "id"])


def _consumer(table_path: str, consumer_id: str, next_snapshot: int, mtime_ms: int) -> None:
    path = Path(table_path) / "consumer" / f"consumer-{consumer_id}"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f'{{\n  "nextSnapshot" : {next_snapshot}\n}}')
    os.utime(path, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def _tag_rows(warehouse: str, tag: str) -> pa.Table:
    table = catalog_for(warehouse).get_table(NAME).copy({"scan.tag-name": tag})
    builder = table.new_read_builder()
    return sort_rows(builder.new_read().to_arrow(builder.new_scan().plan().splits()),
                     ["dt", "id"])


def _finished(registry: CollectorRegistry, job: str) -> float:
    return registry.get_sample_value("paimond_jobs_finished_total",
                                     {"job": job, "table": NAME, "outcome": "success"}) or 0.0


def test_write_only_writers_and_paimond_keep_every_limit(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    ingestion = Ingestion(warehouse)
    table = ingestion.table
    clock = SteppingClock()
    registry = CollectorRegistry()
    daemon = Daemon(load_settings(None, env={"PAIMOND_WAREHOUSE": warehouse}, jobs=ROUTINE),
                    Metrics(registry, clock), clock=clock)
    content_at: dict[int, pa.Table] = {}  # snapshot id -> the model's rows there
    for number, day in enumerate(DAYS):
        for round_, hour in enumerate((10, 11, 12)):
            snapshot_id = ingestion.commit(day, round_, _utc_ms(day, hour))
            content_at[snapshot_id] = ingestion.content()
        latest = table.snapshots.latest_id()
        assert latest is not None
        clock.now_ms[0] = _utc_ms(day, 13)
        if number == 0:
            idle_since_ms = clock.now_ms[0]
            _consumer(table.path, "idle", 1, idle_since_ms)
        _consumer(table.path, "active", latest - 1, clock.now_ms[0])
        before = ingestion.content()
        ingestion.drop_expired(clock.local_now())
        after = ingestion.content()

        runs = daemon.run_once()
        what = f"day {day}"
        assert [r.error for r in runs] == [None], what
        assert {job: r.outcome for job, r in runs[0].reports.items()} == dict.fromkeys(
            DUTIES, "success"), what

        assert read_rows(warehouse, NAME).equals(after), f"{what}: latest read"
        new_latest = table.snapshots.latest_id()
        assert new_latest is not None
        seen_after = False
        for snapshot_id in range(latest + 1, new_latest + 1):
            rows = read_rows(warehouse, NAME, snapshot_id=snapshot_id)
            seen_after = seen_after or (rows.equals(after) and not rows.equals(before))
            assert rows.equals(after if seen_after else before), f"{what}: snapshot {snapshot_id}"
            content_at[snapshot_id] = rows

        live = {dt for dt, _ in ingestion.rows}
        assert {r["dt"] for r in read_rows(warehouse, NAME).to_pylist()} == live
        assert all(datetime.datetime.strptime(dt, "%Y%m%d")
                   >= clock.local_now() - datetime.timedelta(days=3) for dt in live), what
        tags = {tag.name: tag for tag in list_tags(table)}
        assert len(tags) <= 2, f"{what}: tags {sorted(tags)}"
        if number >= 1:
            newest = (day - datetime.timedelta(days=1)).isoformat()
            assert newest in tags, f"{what}: no tag for the day before: {sorted(tags)}"
        names = sorted(tags)
        assert all(datetime.date.fromisoformat(b) - datetime.date.fromisoformat(a)
                   == datetime.timedelta(days=1) for a, b in zip(names, names[1:], strict=False)), names
        for name, tag in tags.items():
            assert _tag_rows(warehouse, name).equals(content_at[tag.snapshot.id]), \
                f"{what}: tag {name} (snapshot {tag.snapshot.id})"
        consumers = sorted(p.name for p in (Path(table.path) / "consumer").iterdir())
        idle_expired = clock.now_ms[0] - 24 * HOUR_MS > idle_since_ms  # Java: strictly before
        assert consumers == (["consumer-active"] if idle_expired
                             else ["consumer-active", "consumer-idle"]), f"{what}: {consumers}"
        ids = table.snapshots.list_ids()
        if idle_expired:  # retain max 5, unless the active consumer still reads an older one
            assert len(ids) <= 5 or ids[0] == latest - 1, f"{what}: snapshots {ids}"
        else:  # the idle consumer pins snapshot 1
            assert ids[0] == 1, f"{what}: snapshots {ids}"
        assert ids[0] <= latest - 1, f"{what}: the active consumer's snapshot expired: {ids}"

    assert len(content_at) > len(DAYS) * 3
    for job in DUTIES:
        assert _finished(registry, job) == len(DAYS), job
    Lifecycle(daemon).shutdown(5)
