"""A pypaimon writer with ``write-only=true`` on one single-bucket primary-key table: each
commit adds one level-0 file of 10 rows, half of whose keys overlap the previous commit's,
so sorted runs pile up until paimond compacts them."""

from __future__ import annotations

import pyarrow as pa
from pypaimon import Schema

from support.pypaimon_tables import catalog_for

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


class Writer:
    def __init__(self, warehouse: str, name: str, compaction_trigger: int,
                 options: dict[str, str] | None = None) -> None:
        """``options``: more table options."""
        catalog = catalog_for(warehouse)
        catalog.create_database(name.split(".")[0], True)
        catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
            "bucket": "1", "write-only": "true",
            "num-sorted-run.compaction-trigger": str(compaction_trigger), **(options or {})}),
            False)
        self.table = catalog.get_table(name)
        self.next_id = 0

    def commit(self) -> None:
        ids = list(range(self.next_id, self.next_id + 10))
        self.next_id += 5  # half the keys overlap the last commit's
        builder = self.table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}, schema=SCHEMA))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
