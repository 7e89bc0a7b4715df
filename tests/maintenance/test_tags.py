"""Tags on pypaimon-written tables: automatic creation over simulated days (commit times and
watermarks set in the snapshot files, a fixed clock), checked against hand-computed tag names
and an independent integer model of Java's ``TagAutoCreation``; ``tag.num-retained-max``
and retention expiry; tag files equal to what pypaimon's ``create_tag`` and Java's ``Tag``
write; every tag read back by pypaimon and by Java at its snapshot's rows; dry runs change
nothing; snapshot expiry afterwards keeps every tagged snapshot readable."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import warm_python
from support.java_reader import JavaReader, canonical_rows, find_jar, unavailable_reason
from support.pypaimon_tables import catalog_for
from support.table_history import tree, write_tag
from support.tag_tables import DAILY, NAME, SCHEMA, TIMES, Writer, utc_ms

from paimond.cli.main import main
from paimond.clock import Clock
from paimond.errors import ConfigError, UnsupportedError
from paimond.format.meta.snapshot import encode_local_date_time
from paimond.maintenance.expire.snapshots import ExpireJob, ExpireSettings
from paimond.maintenance.jobs import JOBS, JobContext
from paimond.maintenance.tags.job import create_tag, delete_tag
from paimond.maintenance.tags.period import TagTimeExtractor, tag_period
from paimond.maintenance.tags.plan import SnapshotTime, plan_auto_tags, resume_point
from paimond.table.catalog import Table
from paimond.table.options.core import TableOptions
from paimond.table.tags import list_tags, read_tag

HOUR_MS, DAY_MS = 3_600_000, 86_400_000


NOW_MS = utc_ms("2024-01-06 06:00")


# ---- building tables -----------------------------------------------------------------------


def _model_rows(snapshot_id: int) -> list[dict[str, Any]]:
    """Commit k writes (0, s<k>) and (k, s<k>): the rows at snapshot s."""
    return [{"id": 0, "v": f"s{snapshot_id}"}] + [{"id": k, "v": f"s{k}"}
                                                  for k in range(1, snapshot_id + 1)]


def _tags(table: Table) -> dict[str, int]:
    return {t.name: t.snapshot.id for t in list_tags(table)}


def _run_tags(table: Table, now_ms: int = NOW_MS, **settings: Any) -> Any:
    job = JOBS["tags"]
    return job.run(table, job.settings(**settings), JobContext(Clock(fixed_ms=now_ms))).result


def _py_rows_of_tag(warehouse: str, tag: str) -> list[dict[str, Any]]:
    table = catalog_for(warehouse).get_table(NAME).copy({"scan.tag-name": tag})
    builder = table.new_read_builder()
    rows = builder.new_read().to_arrow(builder.new_scan().plan().splits())
    return sorted(rows.to_pylist(), key=lambda r: r["id"])


def _assert_tags_read(writer: Writer, java: JavaReader | None = None) -> None:
    """Every tag reads, by pypaimon (and Java), as the rows of the snapshot it pins."""
    for name, snapshot_id in _tags(writer.table).items():
        expected = _model_rows(snapshot_id)
        assert _py_rows_of_tag(writer.warehouse, name) == expected, name
        if java is not None:
            assert sorted(java.read_rows(writer.table.path, tag=name)) == sorted(
                canonical_rows(pa.Table.from_pylist(expected, schema=SCHEMA))), name


# ---- the independent model: Java TagAutoCreation on integer milliseconds -------------------


def _model_name(start_ms: int, period: str) -> str:
    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=start_ms)
    return moment.strftime({"daily": "%Y-%m-%d", "hourly": "%Y-%m-%d %H",
                            "minutes": "%Y%m%d%H%M"}[period])


def model_tags(times_ms: list[int], *, period_ms: int, period: str, delay_ms: int = 0,
               completion: bool = False, retained_max: int | None = None) -> dict[str, int]:
    """Tag name -> snapshot id (ids from 1) after Java commits each snapshot in turn; times
    are local milliseconds."""
    tags: dict[str, int] = {}
    due: int | None = None  # start of the period whose tag is due next
    for snapshot_id, t in enumerate(times_ms, start=1):
        if due is not None and t - delay_ms < due + period_ms:
            continue
        start = (t // period_ms - 1) * period_ms if not (completion and due is not None) else due
        tags.setdefault(_model_name(start, period), snapshot_id)
        due = start + period_ms
        if retained_max is not None:
            while len(tags) > retained_max:
                del tags[min(tags, key=lambda n: tags[n])]
    return tags


# ---- names and periods ---------------------------------------------------------------------


@pytest.mark.parametrize(("options", "name", "not_auto"), [
    ({}, "2024-03-07", ["2024-3-07", "20240307", "2024-02-30"]),
    ({"tag.period-formatter": "without_dashes"}, "20240307", ["2024-03-07"]),
    ({"tag.creation-period": "hourly"}, "2024-03-07 09", ["2024-03-07 24", "2024-03-07"]),
    ({"tag.creation-period": "hourly", "tag.period-formatter": "without_dashes"},
     "20240307 09", ["2024030709"]),
    ({"tag.creation-period": "HOURLY", "tag.period-formatter": "WITHOUT_DASHES_AND_SPACES"},
     "2024030709", ["20240307 09"]),
    ({"tag.creation-period": "two-hours", "tag.period-formatter": "without_dashes"},
     "2024-03-07 09", ["20240307 09"]),
    ({"tag.creation-period-duration": "30 min"}, "202403070930", ["2024-03-07 09"]),
])
def test_period_names_follow_javas_formatters(options: dict[str, str], name: str,
                                              not_auto: list[str]) -> None:
    period = tag_period(TableOptions(options))
    moment = datetime.datetime(2024, 3, 7, 9, 30 if "duration" in str(options) else 0)
    assert period.name_of(moment) == name
    parsed = period.time_of(name)
    assert parsed is not None and parsed <= moment and period.name_of(parsed) == name
    assert not any(period.is_auto(n) for n in not_auto)


def test_daily_tags_parse_only_before_the_first_space() -> None:
    period = tag_period(TableOptions({}))
    assert period.time_of("2024-01-02 anything") == datetime.datetime(2024, 1, 2)
    assert not period.is_auto(" 2024-01-02") and not period.is_auto("my-tag")


def test_delay_must_be_shorter_than_a_period_and_batch_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="tag.creation-delay"):
        tag_period(TableOptions({"tag.creation-period": "hourly", "tag.creation-delay": "1 h"}))
    for value in ("sometimes", "PROCESS_TIME"):  # Java matches the values, not the names
        with pytest.raises(ConfigError, match="tag.automatic-creation"):
            _ = TableOptions({"tag.automatic-creation": value}).tag_automatic_creation
    writer = Writer(tmp_path / "wh", {"tag.automatic-creation": "batch"})
    writer.commit(utc_ms(TIMES[0]))
    with pytest.raises(UnsupportedError, match="batch"):
        _run_tags(writer.table)
    expire = JOBS["expire_tags"]  # expiry alone does not depend on how tags are created
    assert expire.run(writer.table, expire.settings(), JobContext(Clock(fixed_ms=NOW_MS))
                      ).result.done == ()
    callbacks = Writer(tmp_path / "wh2", {"tag.callbacks": "my-callback"})
    callbacks.commit(utc_ms(TIMES[0]))
    for run in (lambda: _run_tags(callbacks.table),
                lambda: create_tag(callbacks.table, clock=Clock(fixed_ms=NOW_MS), name="a")):
        with pytest.raises(UnsupportedError, match="tag.callbacks"):
            run()
    assert _tags(callbacks.table) == {}


@given(st.lists(st.integers(0, 40 * HOUR_MS), min_size=1, max_size=25),
       st.sampled_from([("hourly", HOUR_MS), ("daily", DAY_MS), ("minutes", 90 * 60_000)]),
       st.booleans(), st.sampled_from([None, 1, 3]), st.sampled_from([0, 20 * 60_000]))
def test_planner_matches_the_model(steps: list[int], kind: tuple[str, int], completion: bool,
                                   retained_max: int | None, delay_ms: int) -> None:
    name, period_ms = kind
    base = utc_ms("2024-02-28 00:00")
    times = [base + sum(steps[:i + 1]) // 7 for i in range(len(steps))]  # ascending
    options = {"sink.process-time-zone": "UTC", "tag.creation-delay": f"{delay_ms} ms"}
    if name == "minutes":
        options["tag.creation-period-duration"] = "90 min"
    else:
        options["tag.creation-period"] = name
    table_options = TableOptions(options)
    period = tag_period(table_options)
    snapshots = [SnapshotTime(i, t, None) for i, t in enumerate(times, start=1)]
    _, next_tag = resume_point(period, {}, 1)
    actions, _ = plan_auto_tags(period=period, extractor=TagTimeExtractor.of(table_options),
                                delay_ms=delay_ms, completion=completion,
                                num_retained_max=retained_max, tags={}, snapshots=snapshots,
                                next_tag=next_tag)
    tags: dict[str, int] = {}
    for action in actions:
        if action.create:
            tags[action.name] = action.snapshot_id
        else:
            del tags[action.name]
    assert tags == model_tags(times, period_ms=period_ms, period=name, delay_ms=delay_ms,
                              completion=completion, retained_max=retained_max)


# ---- automatic creation on tables ----------------------------------------------------------

EXPECTED_DAILY = {"2023-12-31": 1, "2024-01-01": 3, "2024-01-04": 5, "2024-01-05": 7}


@pytest.mark.parametrize(("options", "expected"), [
    ({}, EXPECTED_DAILY),
    ({"tag.automatic-completion": "true"},
     {"2023-12-31": 1, "2024-01-01": 3, "2024-01-02": 5, "2024-01-03": 6, "2024-01-04": 7}),
    ({"tag.creation-delay": "1 h"}, {"2023-12-31": 1, "2024-01-01": 4, "2024-01-04": 5}),
    ({"tag.num-retained-max": "2"}, {"2024-01-04": 5, "2024-01-05": 7}),
])
def test_daily_tags_as_java_creates_them(tmp_path: Path, options: dict[str, str],
                                         expected: dict[str, int]) -> None:
    writer = Writer(tmp_path / "wh", {**DAILY, **options})
    times = [utc_ms(t) for t in TIMES]
    # The model agrees with the hand-computed names.
    assert model_tags(times, period_ms=DAY_MS, period="daily",
                      delay_ms=HOUR_MS if "tag.creation-delay" in options else 0,
                      completion="tag.automatic-completion" in options,
                      retained_max=2 if "tag.num-retained-max" in options else None) == expected
    # paimond runs now and then (after snapshots 3, 5 and 7), as a daemon would.
    for upto in (3, 5, 7):
        while writer.count < upto:
            writer.commit(times[writer.count])
        _run_tags(writer.table, times[upto - 1] + 1)
    assert _tags(writer.table) == expected
    # A rerun creates nothing more.
    assert _run_tags(writer.table).done == ()
    _assert_tags_read(writer)


def test_manual_tags_do_not_count(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "wh", {**DAILY, "tag.num-retained-max": "1"})
    times = [utc_ms(t) for t in TIMES]
    for t in times[:2]:
        writer.commit(t)
    create_tag(writer.table, clock=Clock(fixed_ms=NOW_MS), name="release-1", snapshot_id=2)
    for t in times[2:]:
        writer.commit(t)
    _run_tags(writer.table)
    assert _tags(writer.table) == {"release-1": 2, "2024-01-05": 7}


def test_watermark_tags(tmp_path: Path) -> None:
    """Watermarks in UTC+8 (sink.watermark-time-zone); snapshots without one are skipped."""
    writer = Writer(tmp_path / "wh", {"tag.automatic-creation": "watermark",
                                      "tag.creation-period": "hourly",
                                      "sink.watermark-time-zone": "GMT+08:00"})
    base = utc_ms("2024-01-01 00:00")  # 08:00 in UTC+8
    for minute in (10, 50, 65, 70, 190):  # watermarks, minutes after base
        writer.commit(NOW_MS, watermark=base + minute * 60_000)
    writer.commit(NOW_MS, watermark=-(2**63))  # Long.MIN_VALUE: no time
    times = [(8 * 60 + m) * 60_000 for m in (10, 50, 65, 70, 190)]
    expected = model_tags(times, period_ms=HOUR_MS, period="hourly")
    assert {k[-2:]: v for k, v in expected.items()} == {"07": 1, "08": 3, "10": 5}
    _run_tags(writer.table)
    assert _tags(writer.table) == {"2024-01-01 07": 1, "2024-01-01 08": 3, "2024-01-01 10": 5}
    _assert_tags_read(writer)


def test_process_time_in_the_machines_zone_by_default(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "wh", {"tag.automatic-creation": "process-time"})
    writer.commit(utc_ms(TIMES[0]))
    _run_tags(writer.table)
    local = datetime.datetime.fromtimestamp(utc_ms(TIMES[0]) / 1000)
    expected = (local.replace(hour=0, minute=0) - datetime.timedelta(days=1)).strftime("%Y-%m-%d")
    assert _tags(writer.table) == {expected: 1}


# ---- retention, JSON, readers --------------------------------------------------------------


def test_time_retained_expiry_is_strict_and_spares_tags_without_retention(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "wh", {**DAILY, "tag.default-time-retained": "1 h"})
    for t in TIMES[:3]:
        writer.commit(utc_ms(t))
    clock = Clock(fixed_ms=NOW_MS)
    create_tag(writer.table, clock=clock, name="defaulted", snapshot_id=2)
    create_tag(writer.table, clock=clock, name="two-hours", snapshot_id=2,
               time_retained_ms=2 * HOUR_MS)
    (Path(writer.table.file_path("tag")) / "tag-plain").write_bytes(
        Path(writer.table.snapshots.path(1)).read_bytes())  # a tag without retention
    _run_tags(writer.table, NOW_MS)
    created = read_tag(writer.table, "2024-01-01")
    assert created is not None and created.create_time == clock.local_now()
    assert created.time_retained_ns == HOUR_MS * 1_000_000
    defaulted = read_tag(writer.table, "defaulted")
    assert defaulted is not None and defaulted.time_retained_ns == HOUR_MS * 1_000_000
    all_tags = {"2023-12-31", "2024-01-01", "defaulted", "two-hours", "plain"}
    expire = JOBS["expire_tags"]
    expire.run(writer.table, expire.settings(), JobContext(Clock(fixed_ms=NOW_MS + HOUR_MS)))
    assert set(_tags(writer.table)) == all_tags  # not after yet: kept
    expire.run(writer.table, expire.settings(), JobContext(Clock(fixed_ms=NOW_MS + HOUR_MS + 1)))
    assert set(_tags(writer.table)) == {"two-hours", "plain"}
    _assert_tags_read(writer)


def test_a_run_with_nothing_to_do_says_when_the_next_tag_expires(tmp_path: Path) -> None:
    """The daemon skips the job until then at the same snapshot (daemon.tables.duty_skip)."""
    writer = Writer(tmp_path / "wh", {**DAILY, "tag.default-time-retained": "1 h"})
    for t in TIMES[:3]:
        writer.commit(utc_ms(t))
    create_tag(writer.table, clock=Clock(fixed_ms=NOW_MS), name="two-hours", snapshot_id=2,
               time_retained_ms=2 * HOUR_MS)
    job = JOBS["tags"]
    first = job.run(writer.table, job.settings(), JobContext(Clock(fixed_ms=NOW_MS)))
    assert first.quiet_until_ms is None, "it created tags"
    later = NOW_MS + 10 * 60_000
    quiet = job.run(writer.table, job.settings(), JobContext(Clock(fixed_ms=later)))
    assert quiet.quiet_until_ms == NOW_MS + HOUR_MS + 1, "the automatic tags' hour"
    assert _run_tags(writer.table, NOW_MS + HOUR_MS).plan.actions == ()
    assert len(_run_tags(writer.table, NOW_MS + HOUR_MS + 1).done) == 2


def test_expire_tags_older_than_uses_file_times_for_tags_without_retention(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writer = Writer(tmp_path / "wh", {"tag.time-expire-enabled": "false"})
    for t in TIMES[:2]:
        writer.commit(utc_ms(t))
    clock = Clock(fixed_ms=NOW_MS)
    create_tag(writer.table, clock=clock, name="retained", snapshot_id=1, time_retained_ms=HOUR_MS)
    snapshot = writer.table.snapshots.load(1)
    tag_dir = Path(writer.table.file_path("tag"))
    plain = Path(writer.table.snapshots.path(2)).read_bytes()
    (tag_dir / "tag-old-plain").write_bytes(plain)
    (tag_dir / "tag-new-plain").write_bytes(plain)
    write_tag(writer.table, "created-only", snapshot)  # a create time from 2024, no retention
    for name, age_ms in (("old-plain", 3 * DAY_MS), ("new-plain", HOUR_MS),
                         ("created-only", HOUR_MS)):
        os.utime(tag_dir / f"tag-{name}", ns=((NOW_MS - age_ms) * 10**6,) * 2)
    later = Clock(fixed_ms=NOW_MS + HOUR_MS + 1)
    # tag.time-expire-enabled=false: the tags job keeps the expired tag ...
    JOBS["tags"].run(writer.table, JOBS["tags"].settings(), JobContext(later))
    assert "retained" in _tags(writer.table)
    # ... the expire_tags job, like Java's procedure, expires it all the same.
    job = JOBS["expire_tags"]
    report = job.run(writer.table, job.settings(older_than_ms=2 * HOUR_MS + 1),
                     JobContext(later))
    assert {(a.name, a.reason) for a in report.result.done} == {
        ("retained", "time-retained"), ("old-plain", "older-than")}
    moment = (clock.local_now() - datetime.timedelta(minutes=30)).isoformat(sep=" ")
    assert main(["expire-tags", writer.warehouse, "--table", NAME, "--older-than", moment]) == 0
    assert set(_tags(writer.table)) == set()  # new-plain, created-only: files an hour old
    assert main(["expire-tags", writer.warehouse, "--table", NAME, "--older-than", "soon"]) == 2
    assert "neither a duration" in capsys.readouterr().err


def _tag_json(table: Table, name: str) -> dict[str, Any]:
    return json.loads(Path(table.file_path("tag", f"tag-{name}")).read_text())


@pytest.mark.jvm  # starts Java by hand
def test_tag_files_equal_pypaimons_and_javas(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "wh", {**DAILY, "tag.default-time-retained": "1 d"})
    writer.commit(utc_ms(TIMES[0]))
    clock = Clock(fixed_ms=NOW_MS + 123)
    _run_tags(writer.table, NOW_MS + 123)
    ours = _tag_json(writer.table, "2023-12-31")
    snapshot = json.loads(Path(writer.table.snapshots.path(1)).read_text())
    assert ours == {**snapshot, "tagCreateTime": encode_local_date_time(clock.local_now()),
                    "tagTimeRetained": 86400.0}
    text = Path(writer.table.file_path("tag", "tag-2023-12-31")).read_text()
    assert re.search(r'"tagTimeRetained": 86400\.000000000\n}$', text)
    # pypaimon's own tag of the same snapshot: the same fields and values but its create time.
    writer.py_table.create_tag("py", 1, time_retained="1d")
    theirs = _tag_json(writer.table, "py")
    assert {k: v for k, v in theirs.items() if k != "tagCreateTime"} == {
        k: v for k, v in ours.items() if k != "tagCreateTime"}
    # Without a retention both write the plain snapshot.
    create_tag(writer.table, clock=clock, name="plain", snapshot_id=1, time_retained_ms=None)
    writer.py_table.create_tag("py-plain", 1)
    assert _tag_json(writer.table, "py-plain") == snapshot
    assert _tag_json(writer.table, "plain")["tagTimeRetained"] == 86400.0  # option's default
    # Java: its Tag of this snapshot, created at our moment, and how it reads ours.
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    jar = find_jar()
    assert jar is not None
    classes = tmp_path / "classes"
    source = Path(__file__).parents[1] / "support" / "java" / "TagJson.java"
    subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", str(jar), str(source)],
                   check=True, capture_output=True)
    out = tmp_path / "java-tag.json"
    created = clock.local_now().isoformat()
    answer = subprocess.run(
        ["java", "-cp", f"{jar}:{classes}", "TagJson", writer.table.snapshots.path(1), created,
         "PT24H", str(out), writer.table.file_path("tag", "tag-2023-12-31")],
        check=True, capture_output=True, text=True).stdout.split()
    assert answer == [created.rstrip("0").rstrip(".") if "." in created else created,
                      str(DAY_MS * 1_000_000), "true"]
    java_text = out.read_text()
    java = json.loads(java_text)
    assert re.search(r'"tagTimeRetained" : 86400\.000000000\s*}$', java_text)
    for key in ("tagCreateTime", "tagTimeRetained"):
        assert java[key] == ours[key]
    common = set(java) & set(ours)
    assert {k: java[k] for k in common} == {k: ours[k] for k in common}
    # The jar is Paimon 1.0-SNAPSHOT (2024): fields added since, and the log offsets it had.
    assert set(ours) - set(java) <= {"version", "uuid", "writerVersion", "operation", "nextRowId",
                                     "statistics", "properties", "baseManifestListSize",
                                     "deltaManifestListSize"}
    only_java = {k: java[k] for k in set(java) - set(ours)}
    assert set(only_java) <= {"logOffsets", "changelogManifestList"}  # empty or null there
    assert all(v in (None, {}) for v in only_java.values())


def test_tagged_snapshots_survive_snapshot_expiry(tmp_path: Path, java_reader: JavaReader) -> None:
    writer = Writer(tmp_path / "wh", DAILY)
    for t in TIMES:
        writer.commit(utc_ms(t))
    _run_tags(writer.table)
    assert _tags(writer.table) == EXPECTED_DAILY
    ExpireJob(writer.table, clock=Clock(fixed_ms=NOW_MS + DAY_MS),
              settings=ExpireSettings(retain_min=1, retain_max=1, time_retained_ms=0)).run()
    assert writer.table.snapshots.list_ids() == [7]
    _assert_tags_read(writer, java_reader)
    # Deleting a tag (and the files only it kept); the other tags still read.
    delete_tag(writer.table, clock=Clock(fixed_ms=NOW_MS), name="2024-01-01")
    assert set(_tags(writer.table)) == set(EXPECTED_DAILY) - {"2024-01-01"}
    _assert_tags_read(writer, java_reader)


_RUN_TAGS = f"""
import sys
from paimond.clock import Clock
from paimond.maintenance.tags.job import TagsJob
from paimond.table.catalog import open_table
from paimond.table.storage.interface import open_storage
table = open_table(open_storage(sys.argv[1]), sys.argv[1], {NAME!r})
TagsJob(table, clock=Clock(fixed_ms={NOW_MS})).run()
"""


@pytest.mark.parametrize("crash_at", ["tags.tag_created:3", "tags.tag_created:4",
                                      "tags.tag_deleted:1"])
def test_a_killed_run_is_finished_by_the_next(tmp_path: Path, crash_at: str) -> None:
    """Plan: create 2023-12-31, 2024-01-01, 2024-01-04, delete 2023-12-31, create 2024-01-05,
    delete 2024-01-01. Killed anywhere, the rerun ends with Java's two newest."""
    writer = Writer(tmp_path / "wh", {**DAILY, "tag.num-retained-max": "2"})
    for t in TIMES:
        writer.commit(utc_ms(t))
    # The job alone in a fresh process (the command line imports far more: seconds a start).
    command = ["-c", _RUN_TAGS, writer.warehouse]  # forked from the warm server
    killed = warm_python.run(command, {**os.environ, "PAIMOND_CRASH_AT": crash_at})
    assert killed.returncode == 137
    assert _tags(writer.table) != {"2024-01-04": 5, "2024-01-05": 7}
    rerun = warm_python.run(command)
    assert rerun.returncode == 0, rerun.stderr
    assert _tags(writer.table) == {"2024-01-04": 5, "2024-01-05": 7}
    _assert_tags_read(writer)


# ---- dry runs, by hand, the command line ----------------------------------------------------


def test_dry_runs_change_nothing(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "wh", {**DAILY, "tag.default-time-retained": "1 h"})
    for t in TIMES:
        writer.commit(utc_ms(t))
    before = tree(writer.table.path)
    result = _run_tags(writer.table, dry_run=True)
    assert {a.name for a in result.plan.actions if a.create} == set(EXPECTED_DAILY)
    assert "would create" in result.describe()
    create_tag(writer.table, clock=Clock(fixed_ms=NOW_MS), name="x", dry_run=True)
    assert tree(writer.table.path) == before
    _run_tags(writer.table)
    before = tree(writer.table.path)
    job = JOBS["expire_tags"]
    report = job.run(writer.table, job.settings(dry_run=True),
                     JobContext(Clock(fixed_ms=NOW_MS + 2 * HOUR_MS)))
    assert {a.name for a in report.result.plan.actions} == set(EXPECTED_DAILY)
    delete_tag(writer.table, clock=Clock(fixed_ms=NOW_MS), name="2024-01-01", dry_run=True)
    assert tree(writer.table.path) == before


def test_by_hand_never_overwrites(tmp_path: Path) -> None:
    writer = Writer(tmp_path / "wh", DAILY)
    for t in TIMES[:2]:
        writer.commit(utc_ms(t))
    clock = Clock(fixed_ms=NOW_MS)
    create_tag(writer.table, clock=clock, name="a")
    before = Path(writer.table.file_path("tag", "tag-a")).read_bytes()
    with pytest.raises(ConfigError, match="already exists"):
        create_tag(writer.table, clock=clock, name="a", snapshot_id=1)
    assert Path(writer.table.file_path("tag", "tag-a")).read_bytes() == before
    with pytest.raises(ConfigError, match="does not exist"):
        create_tag(writer.table, clock=clock, name="b", snapshot_id=9)
    with pytest.raises(ConfigError):
        create_tag(writer.table, clock=clock, name="../x")
    # Java's validateNoAutoTag: a second automatic-looking tag on an auto-tagged snapshot.
    _run_tags(writer.table)
    with pytest.raises(UnsupportedError, match="already auto-tagged"):
        create_tag(writer.table, clock=clock, name="2020-01-01", snapshot_id=1)
    assert _tags(writer.table) == {"a": 2, "2023-12-31": 1}
    assert delete_tag(writer.table, clock=clock, name="nope").skipped


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    writer = Writer(tmp_path / "wh", DAILY)
    for t in TIMES[:3]:
        writer.commit(utc_ms(t))
    wh = writer.warehouse
    assert main(["tags", wh, "--table", NAME, "--dry-run"]) == 0
    assert "would create tag '2024-01-01'" in capsys.readouterr().out
    assert _tags(writer.table) == {}
    assert main(["create-tag", wh, "--table", NAME, "--tag", "r1", "--snapshot", "2",
                 "--time-retained", "2 h"]) == 0
    assert main(["create-tag", wh, "--table", NAME, "--tag", "r1"]) == 2
    assert main(["tags", wh, "--table", NAME]) == 0
    assert _tags(writer.table) == {"r1": 2, "2023-12-31": 1, "2024-01-01": 3}
    assert main(["delete-tag", wh, "--table", NAME, "--tag", "2023-12-31"]) == 0
    assert main(["expire-tags", wh, "--table", NAME]) == 0  # r1 was created now: kept
    assert _tags(writer.table) == {"r1": 2, "2024-01-01": 3}
    assert read_tag(writer.table, "r1").time_retained_ns == 2 * HOUR_MS * 1_000_000
    _assert_tags_read(writer)
