"""Expiry refuses a table in a manifest format paimond does not know, before it deletes
anything (with `_VERSION 99` in a manifest, status and compact refused while
expire-snapshots exited 0 and deleted files). The manifest is rewritten with the unknown
version and every size that records it (manifest lists, snapshots) made to match, so only
the version is wrong."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import fastavro
import pytest
from support.pypaimon_tables import build_pk_deduplicate

from paimond.cli.common import EXIT_UNREADABLE
from paimond.cli.main import main


def _rewrite(path: Path, change: dict[str, object] | None = None,
             sizes: dict[str, int] | None = None) -> bool:
    """Rewrite an Avro file with ``change`` applied to every record, or the ``_FILE_SIZE`` of
    the manifests named in ``sizes``; False if nothing changed."""
    with path.open("rb") as f:
        reader = fastavro.reader(f)
        schema, codec, records = reader.writer_schema, reader.codec, list(reader)
    changed = False
    for record in records:
        if change:
            record.update(change)
            changed = True
        if sizes and record.get("_FILE_NAME") in sizes:
            record["_FILE_SIZE"] = sizes[record["_FILE_NAME"]]
            changed = True
    if changed:
        out = io.BytesIO()
        fastavro.writer(out, schema, records, codec=codec)
        path.write_bytes(out.getvalue())
    return changed


def _unknown_version(table_dir: Path) -> str:
    """The oldest manifest gets _VERSION 99; the lists and snapshots naming it agree."""
    manifests = table_dir / "manifest"
    target = min((m for m in manifests.glob("manifest-*") if "-list-" not in m.name),
                 key=os.path.getmtime)
    _rewrite(target, {"_VERSION": 99})
    lists = {m.name: m.stat().st_size for m in manifests.glob("manifest-list-*")
             if _rewrite(m, sizes={target.name: target.stat().st_size})}
    lists = {name: (manifests / name).stat().st_size for name in lists}
    for snapshot in (table_dir / "snapshot").glob("snapshot-*"):
        raw = json.loads(snapshot.read_text())
        for field in ("baseManifestList", "deltaManifestList"):
            if raw.get(field) in lists:
                raw[f"{field}Size"] = lists[raw[field]]
        snapshot.write_text(json.dumps(raw))
    return target.name


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_expire_refuses_an_unknown_manifest_version_before_deleting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = tmp_path / "wh"
    spec = build_pk_deduplicate(str(warehouse))
    table_dir = warehouse / "db.db" / spec.name.split(".")[1]
    target = _unknown_version(table_dir)
    before = _files(warehouse)
    for command in (["status", str(warehouse), "--table", spec.name],
                    ["expire-snapshots", str(warehouse), "--table", spec.name,
                     "--retain-max", "1", "--retain-min", "1"]):
        assert main(command) == EXIT_UNREADABLE, command
        said = capsys.readouterr()
        text = said.out + said.err
        assert target in text and "_VERSION 99" in text, text
    assert _files(warehouse) == before, "nothing deleted"


@pytest.mark.parametrize("command", [
    ["compact", "--full"], ["expire-snapshots", "--retain-max", "1", "--retain-min", "1"],
    ["merge-manifests"], ["rewrite-index"]])
def test_a_job_refuses_an_option_value_it_cannot_read_before_writing(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With `bucket = abc` status said UNREADABLE but `compact --full` committed."""
    warehouse = tmp_path / "wh"
    spec = build_pk_deduplicate(str(warehouse))
    schema_dir = warehouse / "db.db" / spec.name.split(".")[1] / "schema"
    latest = max(schema_dir.glob("schema-*"), key=lambda p: int(p.name.split("-")[1]))
    raw = json.loads(latest.read_text())
    raw["options"]["bucket"] = "abc"
    latest.write_text(json.dumps(raw))
    before = _files(warehouse)
    assert main([command[0], str(warehouse), "--table", spec.name, *command[1:]]) != 0
    said = capsys.readouterr()
    assert "invalid option value: option bucket='abc' is not an integer" in said.out + said.err
    assert _files(warehouse) == before, "nothing written or deleted"
