"""`paimond status`: real tables written by pypaimon, text and JSON, and damaged tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from pypaimon import CatalogFactory, Schema

from paimond.cli.main import main

SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string()),
                    pa.field("v", pa.string())])


def _write(table: object, rows: pa.Table) -> None:
    builder = table.new_batch_write_builder()  # type: ignore[attr-defined]
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(rows)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("status") / "wh"
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    catalog.create_database("db", True)
    catalog.create_table("db.pk", Schema.from_pyarrow_schema(
        SCHEMA, partition_keys=["dt"], primary_keys=["id", "dt"],
        options={"bucket": "2", "num-sorted-run.compaction-trigger": "3"}), True)
    catalog.create_table("db.log", Schema.from_pyarrow_schema(SCHEMA), True)
    pk, log = catalog.get_table("db.pk"), catalog.get_table("db.log")
    for commit in range(5):
        rows = pa.table({"id": pa.array([1, 2, 3, 4], pa.int32()),
                         "dt": ["a", "a", "b", "b"], "v": [f"v{commit}"] * 4}, schema=SCHEMA)
        _write(pk, rows)
        _write(log, rows)
    return warehouse


@pytest.fixture
def warehouse(pristine: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "wh"
    shutil.copytree(pristine, copy)
    return copy


def _json_status(warehouse: Path, capsys: pytest.CaptureFixture[str], *extra: str
                 ) -> tuple[int, dict[str, dict]]:
    code = main(["status", str(warehouse), "--json", *extra])
    tables = json.loads(capsys.readouterr().out)["tables"]
    return code, {t["name"]: t for t in tables}


def test_status_json_describes_each_table(warehouse: Path, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    code, tables = _json_status(warehouse, capsys)
    assert code == 0
    assert sorted(tables) == ["db.log", "db.pk"]
    pk = tables["db.pk"]
    assert pk["error"] is None
    assert pk["schema_id"] == 0
    assert pk["primary_keys"] == ["id", "dt"]
    assert pk["merge_engine"] == "deduplicate"
    assert pk["bucket_mode"] == "HASH_FIXED"
    assert (pk["earliest_snapshot"], pk["latest_snapshot"], pk["snapshot_count"]) == (1, 5, 5)
    assert pk["compaction_trigger"] == 3 and pk["stop_trigger"] == 6
    assert pk["manifests"]["base_files"] + pk["manifests"]["delta_files"] == 5
    # Every pypaimon commit lands in level 0: 5 commits -> 5 sorted runs per bucket.
    assert {(b["partition"], b["sorted_runs"]) for b in pk["buckets"]} == {("dt=a", 5), ("dt=b", 5)}
    assert all(b["needs_compaction"] for b in pk["buckets"])
    assert sum(b["levels"][0]["rows"] for b in pk["buckets"]) == 20
    log = tables["db.log"]
    assert log["merge_engine"] is None and log["bucket_mode"] == "BUCKET_UNAWARE"
    assert sum(b["files"] for b in log["buckets"]) == 5


def test_status_text_for_people(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(warehouse), "--table", "db.pk"]) == 0
    out = capsys.readouterr().out
    assert "db.pk  schema 0; primary key id, dt; partitioned by dt" in out
    assert "snapshots 1..5 (5 files)" in out
    assert "5/3 due" in out
    assert "dt=a" in out and "L0:5f/" in out


def _damage_and_check(warehouse: Path, capsys: pytest.CaptureFixture[str], expected: str) -> None:
    code, tables = _json_status(warehouse, capsys)
    assert code == 1
    assert tables["db.log"]["error"] is None, "the undamaged table is still reported"
    assert tables["db.log"]["latest_snapshot"] == 5
    error = tables["db.pk"]["error"]
    assert error is not None and expected in error
    assert "Traceback" not in error


def test_truncated_manifest(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = sorted((warehouse / "db.db" / "pk" / "manifest").glob("manifest-[!l]*"))[0]
    manifest.write_bytes(manifest.read_bytes()[:40])
    _damage_and_check(warehouse, capsys, f"CorruptFileError: {manifest}")


def test_snapshot_with_invalid_json(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snapshot = warehouse / "db.db" / "pk" / "snapshot" / "snapshot-5"
    snapshot.write_text('{"version": 3, "id": ')
    _damage_and_check(warehouse, capsys, f"{snapshot}: invalid snapshot JSON")


def test_missing_schema_file(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = warehouse / "db.db" / "pk" / "schema" / "schema-0"
    schema.unlink()
    _damage_and_check(warehouse, capsys, f"{schema}: file not found")


def test_schema_with_invalid_json(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = warehouse / "db.db" / "pk" / "schema" / "schema-0"
    schema.write_text('{"id": 0, "fields": [{"id": 0, "name": "id", "type": "NOPE"}]}')
    _damage_and_check(warehouse, capsys, f"{schema}: invalid schema JSON")


def test_manifest_referencing_a_missing_data_file(warehouse: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    victim = sorted((warehouse / "db.db" / "pk" / "dt=b" / "bucket-1").glob("data-*"))[0]
    victim.unlink()
    _damage_and_check(warehouse, capsys, f"{victim}: file not found (referenced by ")
    assert main(["status", str(warehouse), "--table", "db.pk", "--no-verify"]) == 0


def test_unknown_table_is_reported(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(warehouse), "--table", "db.nope"]) == 2  # a usage error
    assert f"table db.nope not found in {warehouse}" in capsys.readouterr().err
