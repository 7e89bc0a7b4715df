"""rename-tag, replace-tag and create-tag --from-timestamp on pypaimon-written tables: renamed
tags keep their bytes; a replaced tag is what Java writes for the snapshot it now pins, and
replacing a tag whose snapshot expired deletes exactly what deleting it and tagging again would
(nothing referenced missing, nothing left over, killed anywhere and rerun); the timestamp search
against a hand-computed model over snapshots and tags; errors exit 2 naming what is missing;
branches; every tag read back by pypaimon and Java."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support import warm_python
from support.java_reader import JavaReader, JavaReaders, canonical_rows
from support.pypaimon_tables import catalog_for
from support.table_garbage import unreferenced_files
from support.tag_tables import NAME, SCHEMA, TIMES, Writer, utc_ms

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.errors import ConfigError
from paimond.format.meta.snapshot import encode_tag
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.tags.job import create_tag, delete_tag
from paimond.maintenance.tags.replace import replace_tag
from paimond.maintenance.tags.source import at_or_after
from paimond.table.branches import create_branch
from paimond.table.catalog import Table, open_table
from paimond.table.storage.interface import open_storage
from paimond.table.tags import list_tags, read_tag

NOW_MS = utc_ms("2024-01-07 06:00")
HOUR_MS = 3_600_000


def _model_rows(snapshot_id: int) -> list[dict[str, Any]]:
    """Commit k writes (0, s<k>) and (k, s<k>): the rows at snapshot s."""
    return [{"id": 0, "v": f"s{snapshot_id}"}] + [{"id": k, "v": f"s{k}"}
                                                  for k in range(1, snapshot_id + 1)]


def _tags(table: Table) -> dict[str, int]:
    return {t.name: t.snapshot.id for t in list_tags(table)}


def _tag_bytes(table: Table, name: str) -> bytes:
    return Path(table.meta_file_path("tag", f"tag-{name}")).read_bytes()


def _py_rows_of_tag(warehouse: str, tag: str, table_name: str = NAME) -> list[dict[str, Any]]:
    table = catalog_for(warehouse).get_table(table_name).copy({"scan.tag-name": tag})
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sorted(rows.to_pylist(), key=lambda r: r["id"])


def _check_tags_read(writer: Writer, rows: dict[int, list[dict[str, Any]]] | None = None,
                     java: JavaReader | None = None) -> None:
    for name, snapshot_id in _tags(writer.table).items():
        expected = (rows or {}).get(snapshot_id) or _model_rows(snapshot_id)
        assert _py_rows_of_tag(writer.warehouse, name) == expected, name
        if java is not None:
            assert sorted(java.read_rows(writer.table.path, tag=name)) == sorted(
                canonical_rows(pa.Table.from_pylist(expected, schema=SCHEMA))), name


def _writer(root: Path, commits: int, options: dict[str, str] | None = None) -> Writer:
    writer = Writer(root / "wh", {"sink.process-time-zone": "UTC", **(options or {})})
    for moment in TIMES[:commits]:
        writer.commit(utc_ms(moment))
    return writer


def _expire_to(table: Table, keep: int) -> None:
    ExpireJob(table, clock=Clock(fixed_ms=NOW_MS),
              settings=ExpireSettings(retain_min=keep, retain_max=keep, time_retained_ms=0)).run()


def _files(warehouse: str) -> dict[str, bytes]:
    """Every file but tags, by path (the tags' create times differ between runs)."""
    root = Path(warehouse)
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and "tag" not in p.relative_to(root).parts}


# ---- rename-tag -------------------------------------------------------------------------


def test_rename_keeps_the_bytes_and_refuses_what_java_refuses(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writer = _writer(tmp_path, 3)
    wh, clock = writer.warehouse, Clock(fixed_ms=NOW_MS)
    create_tag(writer.table, clock=clock, name="a", snapshot_id=2, time_retained_ms=HOUR_MS)
    create_tag(writer.table, clock=clock, name="c", snapshot_id=3)
    before = _tag_bytes(writer.table, "a")
    assert main(["rename-tag", wh, "--table", NAME, "--tag", "a", "--to", "b", "--dry-run",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "table_name": NAME, "tag": "a", "new_name": "b", "snapshot_id": 2, "dry_run": True}
    assert _tags(writer.table) == {"a": 2, "c": 3}
    assert main(["rename-tag", wh, "--table", NAME, "--tag", "a", "--to", "b"]) == 0
    assert "renamed tag 'a' to 'b' (snapshot 2)" in capsys.readouterr().out
    assert _tags(writer.table) == {"b": 2, "c": 3}
    assert _tag_bytes(writer.table, "b") == before
    # Java's checks: the tag must exist, the new name must not.
    assert main(["rename-tag", wh, "--table", NAME, "--tag", "a", "--to", "d"]) == 2
    assert "tag 'a' of db.t does not exist" in capsys.readouterr().err
    assert main(["rename-tag", wh, "--table", NAME, "--tag", "b", "--to", "c"]) == 2
    assert "--to: tag 'c' of db.t already exists" in capsys.readouterr().err
    assert main(["rename-tag", wh, "--table", NAME, "--tag", "b", "--to", " "]) == 2
    assert _tags(writer.table) == {"b": 2, "c": 3}
    _check_tags_read(writer)


_RENAME = """
import sys
from paimond.cli.main import main
sys.exit(main(["rename-tag", sys.argv[1], "--table", "db.t", "--tag", "a", "--to", "b"]))
"""


def test_a_killed_rename_is_finished_by_the_next(tmp_path: Path) -> None:
    writer = _writer(tmp_path, 2)
    create_tag(writer.table, clock=Clock(fixed_ms=NOW_MS), name="a", snapshot_id=1)
    before = _tag_bytes(writer.table, "a")
    killed = warm_python.run(["-c", _RENAME, writer.warehouse],
                             {**os.environ, "PAIMOND_CRASH_AT": "tags.tag_copied"})
    assert killed.returncode == 137, killed.stderr
    assert _tags(writer.table) == {"a": 1, "b": 1}
    assert main(["rename-tag", writer.warehouse, "--table", NAME, "--tag", "a", "--to", "b"]) == 0
    assert _tags(writer.table) == {"b": 1}
    assert _tag_bytes(writer.table, "b") == before


# ---- replace-tag ------------------------------------------------------------------------


def test_replacing_a_tag_of_a_live_snapshot_writes_the_tag_java_would(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], java_readers: JavaReaders) -> None:
    writer = _writer(tmp_path, 4, {"tag.default-time-retained": "1 d"})
    wh, clock = writer.warehouse, Clock(fixed_ms=NOW_MS)
    create_tag(writer.table, clock=clock, name="r", snapshot_id=1)
    before = {p: b for p, b in _files(wh).items()}
    result = replace_tag(writer.table, clock=clock, name="r", snapshot_id=3,
                         time_retained_ms=2 * HOUR_MS)
    assert (result.old_snapshot_id, result.snapshot_id, result.tag_file_only) == (1, 3, True)
    snapshot = writer.table.snapshots.load(3)
    assert _tag_bytes(writer.table, "r") == encode_tag(snapshot, clock.local_now(),
                                                       2 * HOUR_MS * 1_000_000)
    assert _files(wh) == before  # nothing but the tag file changed
    # No --snapshot: the latest; no --time-retained: none (Java's replace has no default),
    # so the file is the plain snapshot JSON.
    assert main(["replace-tag", wh, "--table", NAME, "--tag", "r"]) == 0
    assert "replaced tag 'r': snapshot 3 -> snapshot 4, no retention" in capsys.readouterr().out
    tag = read_tag(writer.table, "r")
    assert tag is not None and (tag.snapshot.id, tag.time_retained_ns, tag.create_time) == (
        4, None, None)
    assert _tag_bytes(writer.table, "r") == encode_tag(writer.table.snapshots.load(4), None, None)
    _check_tags_read(writer, java=java_readers.every()[-1])


def test_replace_errors_name_what_is_missing(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    writer = _writer(tmp_path, 2)
    wh = writer.warehouse
    assert main(["replace-tag", wh, "--table", NAME, "--tag", "nope"]) == 2
    assert "tag 'nope' of db.t does not exist" in capsys.readouterr().err
    create_tag(writer.table, clock=Clock(fixed_ms=NOW_MS), name="r", snapshot_id=1)
    assert main(["replace-tag", wh, "--table", NAME, "--tag", "r", "--snapshot", "7"]) == 2
    assert "snapshot 7 of db.t does not exist" in capsys.readouterr().err
    assert main(["replace-tag", wh, "--table", NAME, "--tag", "r", "--time-retained",
                 "soon"]) == 2
    assert _tags(writer.table) == {"r": 1}


def _compacted_history(root: Path) -> tuple[Writer, dict[int, list[dict[str, Any]]]]:
    """Tags 'keep' (snapshot 1) and 'old' (snapshot 2); a full compaction (snapshot 4)
    rewrites every file; snapshots up to 4 expire. 'old' alone keeps its snapshot's manifest
    lists and commit 2's file; commit 1's file is 'keep''s too."""
    writer = _writer(root, 3)
    clock = Clock(fixed_ms=NOW_MS)
    create_tag(writer.table, clock=clock, name="keep", snapshot_id=1)
    create_tag(writer.table, clock=clock, name="old", snapshot_id=2)
    assert main(["compact", writer.warehouse, "--table", NAME, "--full"]) == 0
    writer.count += 1  # snapshot 4 is the compaction's: commit 5 writes (0, s5) and (5, s5)
    writer.commit(utc_ms(TIMES[4]))
    _expire_to(writer.table, 1)
    assert writer.table.snapshots.list_ids() == [5]
    return writer, {5: [r for r in _model_rows(5) if r["id"] != 4]}


def test_replacing_a_tag_of_an_expired_snapshot_deletes_what_only_it_kept(
        tmp_path: Path, java_readers: JavaReaders) -> None:
    """Model: deleting the tag and creating it again leaves the same files."""
    writer, rows = _compacted_history(tmp_path / "replace")
    model_root = tmp_path / "model"
    shutil.copytree(tmp_path / "replace", model_root)
    model = open_table(open_storage(str(model_root / "wh")), str(model_root / "wh"), NAME)
    clock = Clock(fixed_ms=NOW_MS)
    delete_tag(model, clock=clock, name="old")
    create_tag(model, clock=clock, name="old", snapshot_id=5)
    dry = replace_tag(writer.table, clock=clock, name="old", dry_run=True)
    assert not dry.tag_file_only and dry.files.total_files > 0
    result = replace_tag(writer.table, clock=clock, name="old")
    assert result.files == dry.files
    assert "deleted" in result.describe() and "only the old tag kept" in result.describe()
    assert _files(writer.warehouse) == _files(str(model_root / "wh"))
    assert _tags(writer.table) == {"old": 5, "keep": 1}
    assert unreferenced_files(writer.warehouse, NAME) == []
    _check_tags_read(writer, rows, java_readers.every()[-1])


_REPLACE = f"""
import sys
from paimond.clock import Clock
from paimond.maintenance.tags.replace import replace_tag
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
table = open_table(open_storage(sys.argv[1]), sys.argv[1], {NAME!r})
replace_tag(table, clock=Clock(fixed_ms={NOW_MS}), name="old")
"""


@pytest.mark.parametrize("crash_at", ["tags.deletion_noted", "tags.tag_deleted",
                                      "tags.file_deleted:1", "tags.file_deleted:3"])
def test_a_killed_replacement_is_finished_by_the_next(tmp_path: Path, crash_at: str) -> None:
    writer, rows = _compacted_history(tmp_path)
    command = ["-c", _REPLACE, writer.warehouse]
    killed = warm_python.run(command, {**os.environ, "PAIMOND_CRASH_AT": crash_at})
    assert killed.returncode == 137, killed.stderr
    tags = _tags(writer.table)
    assert tags == ({"old": 2, "keep": 1} if crash_at == "tags.deletion_noted"
                    else {"old": 5, "keep": 1})
    _check_tags_read(writer, rows)  # whatever is left reads
    rerun = warm_python.run(command)
    assert rerun.returncode == 0, rerun.stderr
    assert _tags(writer.table) == {"old": 5, "keep": 1}
    assert unreferenced_files(writer.warehouse, NAME) == []
    _check_tags_read(writer, rows)


# ---- create-tag --from-timestamp --------------------------------------------------------


def _model_from_timestamp(snapshots: dict[int, int], tags: dict[str, tuple[int, int]],
                          ts: int) -> int | None:
    """Java create_tag_from_timestamp over ids -> commit times: the earliest live snapshot at
    or after ``ts``, or the snapshot of the first tag (by snapshot id) at or after ``ts`` if
    that one was committed earlier."""
    live = [i for i in sorted(snapshots) if snapshots[i] >= ts]
    found = live[0] if live else None
    later_tags = sorted((sid, t) for sid, t in tags.values() if t >= ts)
    if later_tags and (found is None or later_tags[0][1] < snapshots[found]):
        return later_tags[0][0]
    return found


def test_from_timestamp_against_the_model(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    writer = _writer(tmp_path, 7)
    table, clock = writer.table, Clock(fixed_ms=NOW_MS)
    times = {i: utc_ms(t) for i, t in enumerate(TIMES, start=1)}
    create_tag(table, clock=clock, name="t2", snapshot_id=2)
    create_tag(table, clock=clock, name="t4", snapshot_id=4)
    _expire_to(table, 3)
    assert table.snapshots.list_ids() == [5, 6, 7]
    live = {i: times[i] for i in (5, 6, 7)}
    tags = {"t2": (2, times[2]), "t4": (4, times[4])}
    probes = sorted({t + d for t in times.values() for d in (-1, 0, 1)} | {0})
    for ts in probes:
        source = at_or_after(table, ts)
        assert (None if source is None else source.snapshot.id) == _model_from_timestamp(
            live, tags, ts), ts
    # The command line: an exact commit time, one between, one held by a tag, none after.
    wh = writer.warehouse
    assert main(["create-tag", wh, "--table", NAME, "--tag", "at6", "--from-timestamp",
                 str(times[6])]) == 0
    assert main(["create-tag", wh, "--table", NAME, "--tag", "after5", "--from-timestamp",
                 "2024-01-05T08:30:00+00:00", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()[-1]
    assert json.loads(out)["plan"]["actions"] == [
        {"create": True, "name": "after5", "snapshot_id": 6, "reason": "manual"}]
    assert main(["create-tag", wh, "--table", NAME, "--tag", "from-tag", "--from-timestamp",
                 str(times[1] + 1), "--time-retained", "1 h"]) == 0
    assert _tags(table) == {"t2": 2, "t4": 4, "at6": 6, "after5": 6, "from-tag": 2}
    copied = read_tag(table, "from-tag")
    assert copied is not None and copied.time_retained_ns == HOUR_MS * 1_000_000
    assert main(["create-tag", wh, "--table", NAME, "--tag", "late", "--from-timestamp",
                 str(times[7] + 1)]) == 2
    assert "--from-timestamp: no snapshot of db.t was committed at or after" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["create-tag", wh, "--table", NAME, "--tag", "x", "--snapshot", "6",
              "--from-timestamp", "0"])
    assert usage.value.code == 2
    assert "not allowed with argument --snapshot" in capsys.readouterr().err
    _check_tags_read(writer)


def test_from_timestamp_with_an_explicit_snapshot_is_refused(tmp_path: Path) -> None:
    writer = _writer(tmp_path, 1)
    with pytest.raises(ConfigError, match="exclusive"):
        create_tag(writer.table, clock=Clock(fixed_ms=NOW_MS), name="x", snapshot_id=1,
                   from_timestamp_ms=0)


# ---- branches ---------------------------------------------------------------------------


def test_tag_tools_on_a_branch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writer = _writer(tmp_path, 3)
    wh, clock = writer.warehouse, Clock(fixed_ms=NOW_MS)
    create_tag(writer.table, clock=clock, name="base", snapshot_id=2)
    create_branch(writer.table, "b", "base")
    branch = open_table(open_storage(wh), wh, NAME, "b")
    assert _tags(branch) == {"base": 2}
    assert main(["rename-tag", wh, "--table", NAME, "--branch", "b", "--tag", "base",
                 "--to", "renamed"]) == 0
    assert main(["replace-tag", wh, "--table", f"{NAME}$branch_b", "--tag", "renamed",
                 "--time-retained", "1 h"]) == 0
    assert main(["create-tag", wh, "--table", NAME, "--branch", "b", "--tag", "ts",
                 "--from-timestamp", "0"]) == 0
    capsys.readouterr()
    assert _tags(branch) == {"renamed": 2, "ts": 2}
    assert _tags(writer.table) == {"base": 2}  # main's tags untouched
    assert Path(branch.meta_file_path("tag", "tag-renamed")).is_file()
    assert _py_rows_of_tag(wh, "renamed", f"{NAME}$branch_b") == _model_rows(2)
