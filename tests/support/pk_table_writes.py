"""Primary-key tables written by pypaimon (an oracle) for the request counts and the growth
benchmarks: ``write_pk_table`` (small commits) and ``write_large_pk_table`` (barely
compressible values)."""

from __future__ import annotations


def write_pk_table(warehouse: str, commits: int, name: str = "db.t") -> None:
    """A primary-key table (1 bucket, write-only) with ``commits`` pypaimon commits."""
    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(name.split(".")[0], True)
    catalog.create_table(name, Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1", "write-only": "true"}), True)
    table = catalog.get_table(name)
    for i in range(commits):
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.table({"id": [i, i + 1], "v": ["a", "b"]}, schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()


def write_large_pk_table(warehouse: str, rows: int, commits: int, name: str = "db.big") -> None:
    """A primary-key table (1 bucket, write-only) of ``commits`` pypaimon commits of random,
    barely compressible values: ``rows`` rows of ~120 bytes in all, so that a full compaction
    writes one file of about ``rows * 90`` bytes (larger than an upload part)."""
    import base64
    import os

    import pyarrow as pa
    from pypaimon import CatalogFactory, Schema

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_database(name.split(".")[0], True)
    catalog.create_table(name, Schema.from_pyarrow_schema(
        schema, primary_keys=["id"], options={"bucket": "1", "write-only": "true"}), True)
    table = catalog.get_table(name)
    per = rows // commits
    for i in range(commits):
        values = base64.b64encode(os.urandom(90 * per)).decode()
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(pa.table({"id": list(range(i * per, (i + 1) * per)),
                                    "v": [values[j * 120:(j + 1) * 120] for j in range(per)]},
                                   schema=schema))
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
