"""The option catalogue decides every option key of Paimon's CoreOptions (the checked-in list
of master's keys, and the 2.0.0 jar's keys read by reflection); an undecided key refuses the
compact job only, until an operator accepts it (the setting, the command-line flag)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from support.consumer_tables import NAME, make_table
from support.java_paimon import JavaUnavailable, classpath, classpath_text

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.config.jobs import parse_jobs
from paimond.errors import ConfigError, RefusedError
from paimond.maintenance.jobs import JOBS, ROUTINE, JobContext
from paimond.table.catalog import Table
from paimond.table.options.catalogue import OPTION_CATALOGUE, decide, markdown_table, undecided
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import SEMANTIC_OPTIONS, refusals

KEYS_FILE = Path(__file__).parent / "data" / "coreoptions_master_keys.txt"
TABLE_OPTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "table-options.md"
UNKNOWN = "x-plugin.mode"
CONTEXT = JobContext(Clock(fixed_ms=4_000_000_000_000))


def _master_keys() -> list[str]:
    lines = KEYS_FILE.read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_every_key_of_coreoptions_at_master_is_decided() -> None:
    keys = _master_keys()
    assert len(keys) > 300
    assert [k for k in keys if decide(k) is None] == []


def test_patterns_decide_per_column_and_per_index_keys() -> None:
    decided = {k: decide(k) for k in (
        "fields.price.aggregate-function", "fields.a,b.sequence-group",
        "file-index.bloom-filter.columns", "file-index.bloom-filter.c1.fpp",
        "fields.tags.map.storage-layout", "commit.callback.#.param", "parquet.block.size",
        "sink.parallelism", "metadata.iceberg.storage")}
    assert {k: g.decision if g else None for k, g in decided.items()} == {
        "fields.price.aggregate-function": "implemented", "fields.a,b.sequence-group":
        "implemented", "file-index.bloom-filter.columns": "implemented",
        "file-index.bloom-filter.c1.fpp": "implemented",
        "fields.tags.map.storage-layout": "refused", "commit.callback.#.param": "irrelevant",
        "parquet.block.size": "irrelevant", "sink.parallelism": "irrelevant",
        "metadata.iceberg.storage": "refused"}
    assert decide("bucket-keys") is None and decide("fields.") is None
    assert undecided({"bucket": "1", UNKNOWN: "a", "zz": "b"}, accepted=["zz"]) == (UNKNOWN,)


def test_every_refused_key_makes_a_job_refuse() -> None:
    """A catalogue key decided ``refused`` makes a job of the semantic table refuse a
    primary-key table that sets it (to a value paimond lacks)."""
    values = {"fields.<c>.map.storage-layout": "shared-shredding",
              "metadata.iceberg.storage": "table-location", "manifest.format": "orc"}
    jobs = {job for row in SEMANTIC_OPTIONS for job in row.jobs}
    for group in OPTION_CATALOGUE:
        for key in group.keys if group.decision == "refused" else ():
            options = TableOptions({key.replace("<c>", "c"): values.get(key, "true")},
                                   has_primary_key=True)
            assert any(refusals(options, job) for job in jobs), key


def test_the_docs_page_holds_the_catalogue() -> None:
    match = re.search(r"<!-- option-catalogue: begin -->\n(.*?)\n<!-- option-catalogue: end -->",
                      TABLE_OPTIONS_PAGE.read_text(), re.S)
    assert match, "docs/table-options.md lacks the option-catalogue section"
    assert match.group(1).strip() == markdown_table()


# ---- an undecided key refuses compaction only -----------------------------------------------


@pytest.fixture
def unknown_table(tmp_path: Path) -> Table:
    return make_table(tmp_path / "wh", {UNKNOWN: "fast"})


def test_compaction_refuses_an_undecided_key_naming_it_and_how_to_accept(
        unknown_table: Table) -> None:
    compact = JOBS["compact"]
    latest = unknown_table.snapshots.latest_id()
    with pytest.raises(RefusedError) as raised:
        compact.run(unknown_table, compact.settings(use_processes=False), CONTEXT)
    assert f"{UNKNOWN}=fast" in raised.value.reason
    assert "allow_unknown_options" in raised.value.reason
    assert f"--allow-unknown-option {UNKNOWN}" in raised.value.reason
    assert unknown_table.snapshots.latest_id() == latest
    report = compact.run(unknown_table, compact.settings(
        use_processes=False, allow_unknown_options=(UNKNOWN,)), CONTEXT)
    assert not report.failed
    assert unknown_table.snapshots.latest_id() == latest + 1, "accepted: compacted"


def test_expire_still_runs_on_a_table_with_an_undecided_key(unknown_table: Table) -> None:
    expire = JOBS["expire"]
    report = expire.run(unknown_table, expire.settings(retain_min=1, retain_max=1), CONTEXT)
    assert "expired snapshots 1..4" in report.result.describe()
    assert unknown_table.snapshots.earliest_id() == unknown_table.snapshots.latest_id() == 5


def test_the_cli_exits_1_naming_the_key_and_accepts_it_with_the_flag(
        unknown_table: Table, capsys: pytest.CaptureFixture[str]) -> None:
    warehouse = str(Path(unknown_table.path).parents[1])
    assert main(["compact", warehouse, "--table", NAME, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{NAME}: compact refuses the table" in out and f"{UNKNOWN}=fast" in out
    assert main(["compact", warehouse, "--table", NAME]) == 1
    assert UNKNOWN in capsys.readouterr().err
    assert main(["compact", warehouse, "--table", NAME, "--dry-run",
                 "--allow-unknown-option", UNKNOWN]) == 0
    assert "refuses" not in capsys.readouterr().out
    assert main(["compact", warehouse, "--table", NAME, "--allow-unknown-option", UNKNOWN,
                 "--parallelism", "1"]) == 0
    capsys.readouterr()
    assert main(["status", warehouse, "--table", NAME, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)["tables"][0]
    assert status["undecided_options"] == [UNKNOWN]
    assert "compact" not in status["refusals"]
    assert main(["status", warehouse, "--table", NAME]) == 0
    assert f"undecided options (compact refuses the table unless allow_unknown_options " \
           f"accepts them): {UNKNOWN}" in capsys.readouterr().out


def test_the_daemon_section_accepts_a_list_of_keys() -> None:
    jobs = parse_jobs({"compact": {"allow_unknown_options": [UNKNOWN, "y"]}}, ROUTINE)
    assert jobs.by_name("compact").settings.allow_unknown_options == (UNKNOWN, "y")
    with pytest.raises(ConfigError, match="allow_unknown_options"):
        parse_jobs({"compact": {"allow_unknown_options": [1]}}, ROUTINE)


# ---- against the Java jar -------------------------------------------------------------------

_LISTER = """
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import org.apache.paimon.options.ConfigOption;

public class ListOptionKeys {
    public static void main(String[] args) throws Exception {
        for (Field f : Class.forName("org.apache.paimon.CoreOptions").getFields()) {
            if (Modifier.isStatic(f.getModifiers()) && ConfigOption.class.isAssignableFrom(f.getType())) {
                System.out.println(((ConfigOption<?>) f.get(null)).key());
            }
        }
    }
}
"""


@pytest.mark.jvm
def test_every_key_of_the_newest_jar_is_decided(tmp_path: Path) -> None:
    try:
        jars = classpath("2.0")
    except JavaUnavailable as error:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Java Paimon 2.0 unavailable under CI: {error}")
        pytest.skip(f"Java Paimon 2.0: {error}")
    (tmp_path / "ListOptionKeys.java").write_text(_LISTER)
    compiled = subprocess.run(["javac", "-nowarn", "-d", str(tmp_path), "-cp",
                               classpath_text(jars), str(tmp_path / "ListOptionKeys.java")],
                              capture_output=True, text=True, check=False)
    assert compiled.returncode == 0, compiled.stderr
    listed = subprocess.run(["java", "-cp", classpath_text(jars, tmp_path), "ListOptionKeys"],
                            capture_output=True, text=True, check=False, timeout=120)
    assert listed.returncode == 0, listed.stderr
    keys = sorted(set(listed.stdout.split()))
    assert len(keys) > 300
    assert [k for k in keys if decide(k) is None] == []
