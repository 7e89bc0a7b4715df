"""Plan-time refusals on real tables written by pypaimon: a job refuses a table whose options
it does not implement before writing anything (the table's directory listing stays as it was),
the table's other jobs still run, and dry runs and ``paimond status`` show the refusals and
the duties."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.pypaimon_oracle import read_rows
from support.pypaimon_tables import TableSpec, build_pk_clustering_override, build_pk_listagg

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.errors import RefusedError
from paimond.maintenance.compact.job import CompactJob
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.table.catalog import open_table
from paimond.table.options.semantic import fingerprint
from paimond.table.storage.interface import open_storage

LISTAGG = "sequence.snapshot-ordering=true"  # the listagg table's refused option


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, TableSpec]]:
    warehouse = tmp_path_factory.mktemp("refusals") / "wh"
    specs = [build_pk_listagg(str(warehouse)), build_pk_clustering_override(str(warehouse))]
    return warehouse, {s.name: s for s in specs}


@pytest.fixture
def warehouse(pristine: tuple[Path, dict[str, TableSpec]], tmp_path: Path
              ) -> tuple[str, dict[str, TableSpec]]:
    shutil.copytree(pristine[0], tmp_path / "wh")
    return str(tmp_path / "wh"), pristine[1]


def _listing(root: str) -> dict[str, tuple[int, int]]:
    """Every file and directory under ``root`` with its size and mtime."""
    out = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            stat = os.stat(path)
            out[os.path.relpath(path, root)] = (stat.st_size, stat.st_mtime_ns)
    return out


def _table(path: str, name: str) -> Any:
    return open_table(open_storage(path), path, name)


def test_compact_refuses_listagg_before_writing_anything(
        warehouse: tuple[str, dict[str, TableSpec]], capsys: pytest.CaptureFixture[str]) -> None:
    path, specs = warehouse
    before = _listing(path)
    assert main(["compact", path, "--table", "db.pk_listagg"]) == 1
    err = capsys.readouterr().err
    assert "compact refused" in err and LISTAGG in err and "snapshot" in err
    assert _listing(path) == before, "nothing written, not even a job record"
    table = _table(path, "db.pk_listagg")
    with pytest.raises(RefusedError) as caught:  # the job itself, process pool and all
        CompactJob(table, clock=Clock(fixed_ms=1_700_000_000_000)).run()
    assert caught.value.fingerprint == fingerprint(table.latest_schema())
    assert _listing(path) == before
    assert read_rows(path, "db.pk_listagg").equals(specs["db.pk_listagg"].compacted_rows)


def test_dry_runs_show_the_refusal_per_job(warehouse: tuple[str, dict[str, TableSpec]],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = warehouse
    before = _listing(path)
    assert main(["compact", path, "--table", "db.pk_listagg", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "db.pk_listagg: compact refuses the table, nothing would be written:" in out
    assert LISTAGG in out
    assert main(["expire-snapshots", path, "--table", "db.pk_listagg", "--dry-run"]) == 0
    assert "refuses" not in capsys.readouterr().out
    assert main(["rebuild-dv", path, "--table", "db.pk_clustering_override", "--dry-run"]) == 0
    assert "rebuild_dv refuses the table" in capsys.readouterr().out
    assert _listing(path) == before


def test_expire_and_merge_manifests_still_run_on_the_refused_table(
        warehouse: tuple[str, dict[str, TableSpec]], capsys: pytest.CaptureFixture[str]) -> None:
    path, specs = warehouse
    table = _table(path, "db.pk_listagg")
    assert table.snapshots.earliest_id() == 1 and table.snapshots.latest_id() == 3
    context = JobContext(Clock(fixed_ms=4_000_000_000_000))
    merged = JOBS["merge_manifests"].run(table, JOBS["merge_manifests"].settings(), context)
    assert "refuse" not in merged.result.describe()
    assert table.snapshots.latest_id() == 4, "the manifests were merged into snapshot 4"
    expire = JOBS["expire"]
    report = expire.run(table, expire.settings(retain_min=1, retain_max=1), context)
    assert "expired snapshots 1..3" in report.result.describe()
    assert table.snapshots.earliest_id() == table.snapshots.latest_id() == 4
    assert read_rows(path, "db.pk_listagg").equals(specs["db.pk_listagg"].compacted_rows)


def test_pk_clustering_override_is_refused_by_compaction(
        warehouse: tuple[str, dict[str, TableSpec]], capsys: pytest.CaptureFixture[str]) -> None:
    path, specs = warehouse
    before = _listing(path)
    assert main(["compact", path, "--table", "db.pk_clustering_override", "--full"]) == 1
    err = capsys.readouterr().err
    assert "pk-clustering-override=true" in err and "clustering" in err
    assert _listing(path) == before
    name = "db.pk_clustering_override"
    assert read_rows(path, name).equals(specs[name].compacted_rows)


def test_status_shows_refusals_and_duties(warehouse: tuple[str, dict[str, TableSpec]],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = warehouse
    assert main(["status", path, "--table", "db.pk_listagg"]) == 0
    text = capsys.readouterr().out
    assert "writers: compact and expire themselves too (write-only=false)" in text
    assert f"refused by compact: {LISTAGG}" in text
    lines = {line.split()[0] + " " + line.split()[1]: line for line in text.splitlines()
             if line.startswith("    ")}
    assert "refused: compact: " + LISTAGG in lines["compaction refused:"]
    assert lines["snapshot expiry"].split()[-2:] == ["paimond:", "expire"]
    assert lines["manifest merging"].split()[-2:] == ["paimond:", "merge_manifests"]
    assert "not needed: partition expiry, tag creation" in text

    assert main(["status", path, "--json"]) == 0
    tables = {t["name"]: t for t in json.loads(capsys.readouterr().out)["tables"]}
    listagg, clustered = tables["db.pk_listagg"], tables["db.pk_clustering_override"]
    assert listagg["write_only"] is False
    assert list(listagg["refusals"]) == ["compact"] and LISTAGG in listagg["refusals"]["compact"][0]
    performers = {d["name"]: d["performer"] for d in listagg["duties"]}
    assert performers["compaction"] == "refused" and performers["snapshot expiry"] == "paimond"
    assert performers["file indexes"] == "not needed"
    assert set(clustered["refusals"]) == {"compact", "rebuild_dv"}


def test_spark_maintain_runs_the_jobs_a_refusal_leaves(
        warehouse: tuple[str, dict[str, TableSpec]]) -> None:
    """Compaction refuses before it needs the session's executors, so none is given."""
    import paimond.spark

    path, specs = warehouse
    no_session: Any = None
    summary = paimond.spark.maintain(no_session, path, "db.pk_listagg",
                                     jobs=("compact", "expire", "merge_manifests"))
    assert list(summary.refused) == ["compact"] and LISTAGG in summary.refused["compact"]
    assert list(summary.reports) == ["expire", "merge_manifests"] and not summary.failed
    assert summary.compaction is None
    assert "db.pk_listagg: compact refused: " + LISTAGG in summary.describe()
    assert _table(path, "db.pk_listagg").snapshots.latest_id() == 4, "merge-manifests committed"
    assert read_rows(path, "db.pk_listagg").equals(specs["db.pk_listagg"].compacted_rows)
