"""Marking partitions done: the ``_SUCCESS`` file Java's ``SuccessFileMarkDoneAction`` writes
(byte for byte, and each side keeping the other's creation time), the command's output and
its refusals of the metastore and remote actions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from support.java_maintainer import JavaMaintainer
from support.pypaimon_tables import TableWriter, catalog_for

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.errors import ConfigError
from paimond.maintenance.partition_done import (
    SuccessFile,
    decode_success_file,
    encode_success_file,
    mark_partitions_done,
    partition_dir,
)
from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import open_storage

SCHEMA = pa.schema([pa.field("dt", pa.string(), nullable=False),
                    pa.field("hh", pa.int32(), nullable=False),
                    pa.field("id", pa.int32(), nullable=False)])
T0 = 1_704_067_200_000


def _create(warehouse: Path, name: str = "db.t", options: dict[str, str] | None = None) -> Path:
    writer = TableWriter(catalog_for(str(warehouse)), name, SCHEMA, partition_keys=("dt", "hh"),
                         options={"bucket": "-1", **(options or {})})
    writer.commit([{"dt": "2024-01-01", "hh": 10, "id": 1}, {"dt": "a b", "hh": 9, "id": 2}])
    database, table = name.split(".")
    return warehouse / f"{database}.db" / table


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    warehouse = tmp_path_factory.mktemp("done") / "wh"
    _create(warehouse)
    _create(warehouse, "db.metastore", {"partition.mark-done-action": "success-file,done-partition"})
    _create(warehouse, "db.custom", {"partition.mark-done-action": "custom"})
    return warehouse


@pytest.fixture
def warehouse(pristine: Path, tmp_path: Path) -> Path:
    shutil.copytree(pristine, tmp_path / "wh")
    return tmp_path / "wh"


def _table(warehouse: Path, name: str = "db.t") -> Table:
    storage = open_storage(str(warehouse))
    return open_table(storage, storage.root, name)


def test_the_success_file_is_javas_pretty_json() -> None:
    data = encode_success_file(SuccessFile(T0, T0 + 5))
    assert data == (b'{\n  "creationTime" : 1704067200000,\n'
                    b'  "modificationTime" : 1704067200005\n}')
    assert decode_success_file(data, "_SUCCESS") == SuccessFile(T0, T0 + 5)
    assert decode_success_file(b'{"modificationTime":2,"creationTime":1,"x":3}',
                               "_SUCCESS") == SuccessFile(1, 2)


def test_marking_writes_then_keeps_the_creation_time(warehouse: Path) -> None:
    table = _table(warehouse)
    first = mark_partitions_done(table, [{"dt": "2024-01-01", "hh": "10"}], Clock(T0))
    path = warehouse / "db.db" / "t" / "dt=2024-01-01" / "hh=10" / "_SUCCESS"
    assert first.marked[0].success_file.endswith("dt=2024-01-01/hh=10/_SUCCESS")
    assert path.read_bytes() == encode_success_file(SuccessFile(T0, T0))
    again = mark_partitions_done(table, [{"dt": "2024-01-01", "hh": "10"}], Clock(T0 + 9))
    assert again.marked[0].existed
    assert path.read_bytes() == encode_success_file(SuccessFile(T0, T0 + 9))


def test_partition_paths_are_escaped_in_key_order_and_may_name_a_parent() -> None:
    assert partition_dir(("dt", "hh"), {"hh": "1", "dt": "a b/c"}) == "dt=a b%2Fc/hh=1/"
    assert partition_dir(("dt", "hh"), {"dt": "2024-01-01"}) == "dt=2024-01-01/"
    for spec, message in [({"hh": "1"}, "leading partition keys"), ({"id": "1"}, "not a "
                          "partition key"), ({"dt": ""}, "empty value")]:
        with pytest.raises(ConfigError, match=message):
            partition_dir(("dt", "hh"), spec)


def test_the_command_marks_each_partition_and_prints_json(
        warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["mark-partition-done", str(warehouse), "--table", "db.t",
            "--partition", "dt=2024-01-01,hh=10", "--partition", "dt=a b,hh=9;dt=a b"]
    assert main([*argv, "--dry-run", "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["dry_run"] and planned["actions"] == ["success-file"]
    assert [m["partition"] for m in planned["marked"]] == ["dt=2024-01-01/hh=10/",
                                                           "dt=a b/hh=9/", "dt=a b/"]
    assert not list(warehouse.rglob("_SUCCESS"))
    assert main(argv) == 0
    assert "marked 3 partition(s) done (success-file)" in capsys.readouterr().out
    table_dir = warehouse / "db.db" / "t"
    assert sorted(str(p.relative_to(table_dir)) for p in table_dir.rglob("_SUCCESS")) == [
        "dt=2024-01-01/hh=10/_SUCCESS", "dt=a b/_SUCCESS", "dt=a b/hh=9/_SUCCESS"]


@pytest.mark.parametrize(("table", "argv", "message"), [
    ("db.metastore", [], "done-partition adds a 'done' partition to a metastore"),
    ("db.custom", [], "custom runs a Java class"),
    ("db.t", ["--partition", "id=1"], "id is not a partition key"),
    ("db.t", ["--partition", "dt"], "wants K=V"),
    ("db.t", ["--dry-run"], "name at least one partition"),
])
def test_refusals_exit_2_and_write_nothing(warehouse: Path, capsys: pytest.CaptureFixture[str],
                                           table: str, argv: list[str], message: str) -> None:
    assert main(["mark-partition-done", str(warehouse), "--table", table,
                 *(argv or ["--partition", "dt=2024-01-01"])]) == 2
    assert message in capsys.readouterr().err
    assert not list(warehouse.rglob("_SUCCESS"))


def test_java_and_paimond_write_the_same_success_file(warehouse: Path,
                                                      java_maintainer: JavaMaintainer) -> None:
    table_dir = warehouse / "db.db" / "t"
    java_maintainer.mark_partition_done(table_dir, "dt=2024-01-01/hh=10/")
    written = table_dir / "dt=2024-01-01" / "hh=10" / "_SUCCESS"
    by_java = written.read_bytes()
    java = decode_success_file(by_java, str(written))
    assert java.creation_time_ms == java.modification_time_ms
    assert encode_success_file(java) == by_java  # the same bytes for the same times
    # paimond keeps Java's creation time, and Java keeps paimond's
    mark_partitions_done(_table(warehouse), [{"dt": "2024-01-01", "hh": "10"}],
                         Clock(java.creation_time_ms + 1000))
    assert decode_success_file(written.read_bytes(), "") == SuccessFile(
        java.creation_time_ms, java.creation_time_ms + 1000)
    mark_partitions_done(_table(warehouse), [{"dt": "a b", "hh": "9"}], Clock(T0))
    java_maintainer.mark_partition_done(table_dir, "dt=a b/hh=9/")
    assert decode_success_file((table_dir / "dt=a b" / "hh=9" / "_SUCCESS").read_bytes(),
                               "").creation_time_ms == T0
    # Java refuses the metastore action as paimond does
    with pytest.raises(Exception, match="metastore"):
        java_maintainer.mark_partition_done(warehouse / "db.db" / "metastore", "dt=2024-01-01/")
