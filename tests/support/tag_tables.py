"""A pypaimon ``Writer`` committing at chosen times, for automatic tag creation and expiry."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pyarrow as pa
from pypaimon import Schema

from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
from support.pypaimon_tables import catalog_for

NAME = "db.t"


SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def utc_ms(text: str) -> int:
    moment = datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.timezone.utc)
    return int(moment.timestamp() * 1000)


# Commit times of snapshots 1..7 (UTC); sink.process-time-zone is UTC in these tables.
TIMES = ["2024-01-01 10:00", "2024-01-01 23:00", "2024-01-02 00:30", "2024-01-02 12:00",
         "2024-01-05 08:00", "2024-01-05 09:00", "2024-01-06 00:00"]


class Writer:
    """A pypaimon-written primary-key table; each commit's time (and watermark) is then set in
    its snapshot file, as a writer committing at that moment would have written it."""

    def __init__(self, warehouse: Path, options: dict[str, str]) -> None:
        self.warehouse = str(warehouse)
        catalog = catalog_for(self.warehouse)
        catalog.create_database("db", True)
        catalog.create_table(NAME, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
            "bucket": "1", "write-only": "true", **options}), False)
        self.py_table = catalog.get_table(NAME)
        self.table = open_table(open_storage(self.warehouse), self.warehouse, NAME)
        self.count = 0

    def commit(self, time_ms: int, watermark: int | None = None) -> int:
        self.count += 1
        k = self.count
        builder = self.py_table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.Table.from_pylist([{"id": 0, "v": f"s{k}"}, {"id": k, "v": f"s{k}"}],
                                               schema=SCHEMA))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
        path = Path(self.table.snapshots.path(k))
        raw = json.loads(path.read_text())
        raw["timeMillis"] = time_ms
        if watermark is not None:
            raw["watermark"] = watermark
        path.write_text(json.dumps(raw, indent=2))
        return k


DAILY = {"tag.automatic-creation": "process-time", "sink.process-time-zone": "UTC"}
