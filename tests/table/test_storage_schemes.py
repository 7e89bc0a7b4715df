"""Every warehouse URI gets one line, never a traceback: a scheme paimond does not know is
named, one whose implementation is not installed names what to install (exit 2, from the CLI
and from the daemon's config); on a storage where paimond has no atomic create, a job that
would commit is refused before it writes anything."""

from __future__ import annotations

import dataclasses
import importlib.util
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.pypaimon_tables import build_pk_deduplicate

from paimond.cli.main import main
from paimond.errors import ConfigError, UnsupportedError
from paimond.table.catalog import open_table
from paimond.table.catalogs.catalog_storage import with_catalog
from paimond.table.storage import schemes
from paimond.table.storage.interface import open_storage
from paimond.table.storage.schemes import check_writable, scheme_of

# scheme -> (a warehouse URI, the module it needs, what the message names)
NEEDS = {
    "gs": ("gs://bucket/wh", "gcsfs", "paimond[gcs]"),
    "oss": ("oss://bucket/wh", "ossfs", "paimond[oss]"),
    "abfs": ("abfs://container@account/wh", "adlfs", "paimond[azure]"),
}
UNKNOWN = ("ftp://host/wh", "foo://x/wh", "hdfs2://nn/wh")


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "paimond.cli.main", *argv], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.mark.parametrize("scheme", sorted(NEEDS))
def test_a_storage_whose_extra_is_missing_names_the_extra(scheme: str, tmp_path: Path) -> None:
    uri, module, extra = NEEDS[scheme]
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{module} is installed here: {scheme}:// would be opened")
    for argv in (["status", uri], ["compact", uri, "--table", "a.b"]):
        result = _cli(*argv, cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        line = _one_line(result.stderr)
        assert uri in line and f"pip install '{extra}'" in line


@pytest.mark.parametrize("uri", UNKNOWN)
def test_an_unknown_scheme_is_named(uri: str, tmp_path: Path) -> None:
    result = _cli("status", uri, cwd=tmp_path)
    assert result.returncode == 2
    scheme = uri.partition("://")[0]
    assert f"does not know the storage scheme {scheme!r}" in _one_line(result.stderr)


def test_hdfs_without_a_hadoop_client_is_one_line(tmp_path: Path) -> None:
    result = _cli("status", "hdfs://namenode:8020/wh", cwd=tmp_path)
    if result.returncode == 0:
        pytest.skip("a Hadoop client is installed here")
    assert result.returncode == 2
    assert "hdfs:// needs a Hadoop client" in _one_line(result.stderr)


def test_the_daemon_config_names_the_storage_too(tmp_path: Path) -> None:
    config = tmp_path / "paimond.toml"
    for uri in ("ftp://host/wh", *(u for u, m, _ in NEEDS.values()
                                   if importlib.util.find_spec(m) is None)):
        config.write_text(f'[[warehouses]]\nuri = "{uri}"\n')
        result = _cli("run-once", "--config", str(config), cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert uri in _one_line(result.stderr)


def test_the_stores_paimond_commits_on_have_an_atomic_create() -> None:
    for uri in ("/some/path", "file:///some/path", "s3://bucket/wh", "s3a://bucket/wh",
                "memory://wh", *(["abfs://c/wh"] if importlib.util.find_spec("adlfs") else [])):
        assert scheme_of(uri).atomic_create is not None, uri
        check_writable(uri)
    with pytest.raises(ConfigError, match="storage scheme 'ftp'"):
        scheme_of("ftp://host/wh")


def test_a_job_on_a_store_without_atomic_create_is_refused_before_it_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "wh"
    name = build_pk_deduplicate(str(warehouse)).name
    before = sorted(str(p) for p in warehouse.rglob("*"))
    # the local store as one without an atomic create (as gs://, oss://, abfs://, hdfs://)
    local = schemes._BY_NAME[""]
    monkeypatch.setitem(schemes._BY_NAME, "", dataclasses.replace(local, atomic_create=None))

    with pytest.raises(UnsupportedError, match="no atomic create"):
        check_writable(str(warehouse))
    assert main(["compact", str(warehouse), "--table", name, "--full"]) != 0
    assert "cannot commit safely" in capsys.readouterr().err
    assert main(["status", str(warehouse)]) == 0  # reading is fine
    assert sorted(str(p) for p in warehouse.rglob("*")) == before


def test_a_catalog_lock_stands_in_for_the_missing_atomic_create(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    warehouse = tmp_path / "wh"
    name = build_pk_deduplicate(str(warehouse)).name
    local = schemes._BY_NAME[""]
    monkeypatch.setitem(schemes._BY_NAME, "", dataclasses.replace(local, atomic_create=None))
    catalog_db = tmp_path / "catalog.db"
    options = {"metastore": "jdbc", "uri": f"jdbc:sqlite:{catalog_db}", "lock.enabled": "true",
               "lock-acquire-timeout": "1 s", "lock-check-max-sleep": "100 ms"}
    flags = [f"--catalog-option={k}={v}" for k, v in options.items()]
    table = open_table(open_storage(str(warehouse)), str(warehouse), name)
    base = table.snapshots.latest_id()
    assert base is not None

    # another writer holds the table's lock: paimond's commit waits for it, then gives up
    database, table_name = name.split(".")
    with sqlite3.connect(catalog_db) as connection:
        connection.execute("CREATE TABLE paimon_distributed_locks(lock_id VARCHAR(255) NOT NULL,"
                           "acquired_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL,"
                           "expire_time_seconds BIGINT DEFAULT 0 NOT NULL,PRIMARY KEY (lock_id))")
        connection.execute("INSERT INTO paimon_distributed_locks VALUES (?, CURRENT_TIMESTAMP, "
                           "3600)", (f"jdbc.{database}.{table_name}",))
    assert main(["compact", str(warehouse), "--table", name, "--full", *flags]) != 0
    assert "not acquired" in capsys.readouterr().err
    assert table.snapshots.latest_id() == base

    with sqlite3.connect(catalog_db) as connection:
        connection.execute("DELETE FROM paimon_distributed_locks")
    assert main(["compact", str(warehouse), "--table", name, "--full", *flags]) == 0
    latest = table.snapshots.latest()
    assert latest is not None and (latest.id, latest.commit_kind) == (base + 1, "COMPACT")

    # under the lock a file that exists is never overwritten, snapshot or not
    storage = with_catalog(open_storage(str(warehouse)), options)
    snapshot_path = table.snapshots.path(latest.id)
    before = storage.read_bytes(snapshot_path)
    assert not storage.create_exclusive(snapshot_path, b"{}")
    assert storage.read_bytes(snapshot_path) == before
    other = str(warehouse / "_paimond" / "probe")
    assert storage.create_exclusive(other, b"first")
    assert not storage.create_exclusive(other, b"second")
    assert storage.read_bytes(other) == b"first"

    # a store whose files show while being written (HDFS) gets no lock stand-in
    monkeypatch.setitem(schemes._BY_NAME, "", dataclasses.replace(
        local, atomic_create=None, whole_writes=False))
    assert main(["compact", str(warehouse), "--table", name, "--full", *flags]) != 0
    assert "temporary-file-and-rename" in capsys.readouterr().err
    assert table.snapshots.latest_id() == latest.id
