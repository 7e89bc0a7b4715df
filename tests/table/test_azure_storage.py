"""An ``abfs://`` warehouse on a real Azure Blob endpoint (Azurite on loopback): paimond creates
a file exclusively there (a Put Blob with ``If-None-Match: *``), so it commits as on S3: a table
pypaimon wrote is compacted and expired on the store, and pypaimon reads the same rows from it
afterwards. Credentials stay out of every message."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from support.azurite import Azurite, azurite  # noqa: F401 (the fixture)
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import build_pk_deduplicate

from paimond.cli.main import main
from paimond.errors import MissingFileError
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage

pytestmark = pytest.mark.azure


def _container(endpoint: Azurite) -> tuple[str, Any]:
    import fsspec

    name = f"lake-{uuid.uuid4().hex[:12]}"
    fs = fsspec.filesystem("abfs", skip_instance_cache=True, use_listings_cache=False,
                           **endpoint.storage_options)
    fs.mkdir(name)
    return name, fs


def test_a_file_is_created_exclusively(azurite: Azurite) -> None:  # noqa: F811
    container, _ = _container(azurite)
    storage = open_storage(f"abfs://{container}/wh", azurite.storage_options)

    assert storage.create_exclusive("snapshot/snapshot-1", b"first")
    assert not storage.create_exclusive("snapshot/snapshot-1", b"second")
    assert storage.read_bytes("snapshot/snapshot-1") == b"first"
    assert [s.name for s in storage.list_dir("snapshot")] == ["snapshot-1"]
    assert storage.mtime("snapshot/snapshot-1") is not None
    with pytest.raises(MissingFileError) as missing:
        storage.read_bytes("snapshot/snapshot-2")
    assert azurite.connection_string not in str(missing.value)
    assert "Eby8vdM02" not in str(missing.value)


def test_a_table_on_azure_is_compacted_and_expired_and_reads_the_same(
        azurite: Azurite, tmp_path: Path, capsys: Any) -> None:  # noqa: F811
    local = tmp_path / "local"
    spec = build_pk_deduplicate(str(local))
    expected = read_rows(str(local), spec.name, include_level0=True)
    container, fs = _container(azurite)
    fs.put(str(local) + "/", f"{container}/wh/", recursive=True)
    warehouse = f"abfs://{container}/wh"
    option = ["--storage-option", f"connection_string={azurite.connection_string}"]

    assert main(["compact", warehouse, "--table", spec.name, "--full", *option]) == 0
    assert main(["expire-snapshots", warehouse, "--table", spec.name, "--retain-max", "1",
                 "--retain-min", "1", "--older-than", "0 ms", *option]) == 0
    assert main(["status", warehouse, "--table", spec.name, *option]) == 0
    out = capsys.readouterr().out
    assert "Eby8vdM02" not in out

    table = open_table(open_storage(warehouse, azurite.storage_options), warehouse, spec.name)
    assert table.snapshots.list_ids() == [spec.snapshot_count + 1]
    back = tmp_path / "back"
    fs.get(f"{container}/wh/", str(back) + "/", recursive=True)
    assert read_rows(str(back), spec.name).equals(expected)
