"""The effective policy from plain values: table options over a policy's retention, the
full-compaction window, the concurrency share's round robin, why a job did not run, and the
admission rule."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from paimond.config.settings import Settings, load_settings
from paimond.daemon.http.status_text import render_html, render_text
from paimond.daemon.http.status_view import table_json
from paimond.daemon.outcomes import JobOutcome
from paimond.daemon.tables.admission import Figures, admit
from paimond.daemon.tables.evaluate import Standing
from paimond.daemon.tables.policy import Policies, effective, window_start
from paimond.maintenance.jobs import ROUTINE, ROUTINE_JOBS

CONFIG = """
[[warehouses]]
uri = "/tmp/wh"
[jobs.expire]
retain_max = 50
[[policies]]
tables = ["logs.*"]
concurrency = 2
full_compaction_window = "23:00-01:00"
[policies.jobs.expire]
retain_max = 5
retain_min = 1
older_than = "10 min"
[[policies]]
tables = ["sales.*"]
paused = true
[policies.jobs.merge_manifests]
enabled = false
"""


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    path = tmp_path / "paimond.toml"
    path.write_text(CONFIG)
    return load_settings(str(path), env={}, jobs=ROUTINE)


def _utc(hour: int, minute: int = 0, day: int = 2) -> float:
    return datetime.datetime(2026, 1, day, hour, minute, tzinfo=datetime.timezone.utc).timestamp()


def test_window_start_within_a_day_and_across_midnight() -> None:
    assert window_start((60, 240), _utc(2, 30)) == _utc(1)
    assert window_start((60, 240), _utc(4)) is None  # the end is outside
    assert window_start((60, 240), _utc(0, 59)) is None
    assert window_start((23 * 60, 60), _utc(23, 30)) == _utc(23)
    assert window_start((23 * 60, 60), _utc(0, 30)) == _utc(23, day=1)  # yesterday's start
    assert window_start((23 * 60, 60), _utc(1)) is None


def test_a_tables_own_paimon_option_wins_over_the_policy(settings: Settings) -> None:
    policy = settings.policy("logs.a")
    plain = effective(settings, policy, {})
    expire = plain.jobs.by_name("expire").settings
    assert (expire.retain_max, expire.retain_min) == (5, 1)
    assert expire.older_than_ms == 600_000
    assert plain.sources["expire.retain_max"] == policy.name  # type: ignore[union-attr]
    own = effective(settings, policy, {"snapshot.num-retained.max": "7",
                                       "snapshot.time-retained": "1 h"})
    # the table sets Paimon's option: [jobs] applies as for any table (50 overrides, None
    # leaves the table's own time-retained), the policy's other keys still hold
    kept = own.jobs.by_name("expire").settings
    assert kept.retain_max == 50 and kept.older_than_ms is None
    assert kept.retain_min == 1
    assert own.sources["expire.retain_max"].startswith("table option snapshot.num-retained.max=7")
    assert effective(settings, None, {}).jobs == settings.jobs


def test_the_full_compaction_window_runs_one_full_compaction(settings: Settings) -> None:
    policies = Policies(settings)
    assert not policies.for_run("logs.a", {}, _utc(22, 59)).jobs.by_name("compact").settings.full
    inside = policies.for_run("logs.a", {}, _utc(23, 10))
    assert inside.jobs.by_name("compact").settings.full and "compact.full" in inside.sources
    outside = policies.for_run("sales.a", {}, _utc(23, 10))  # no window
    assert not outside.jobs.by_name("compact").settings.full
    done = {"compact": JobOutcome("success", "compacted")}
    policies.record("logs.a", ("compact",), done, None, _utc(23, 20), full=True)
    assert not policies.for_run("logs.a", {}, _utc(0, 30, day=3)).jobs.by_name("compact").settings.full
    # the next night's window: full again
    assert policies.for_run("logs.a", {}, _utc(23, 5, day=3)).jobs.by_name("compact").settings.full


def test_a_share_goes_round_robin_and_others_are_unlimited(settings: Settings) -> None:
    policies = Policies(settings)
    due = ["logs.big", "logs.a", "logs.b", "other.t"]  # most urgent first
    assert policies.admit(due, running=[]) == ["logs.big", "logs.a", "other.t"]
    assert policies.waiting("logs.b") == ("waiting: policies[0] (logs.*) runs at most 2 "
                                          "table(s) at once")
    for name, at in (("logs.big", 10.0), ("logs.a", 11.0)):
        policies.started(name, at)
    # one slot free while logs.a runs: logs.b (never started) before logs.big, more urgent
    assert policies.admit(["logs.big", "logs.b"], running=["logs.a"]) == ["logs.b"]
    policies.started("logs.b", 12.0)
    assert policies.admit(["logs.big", "logs.b"], running=[]) == ["logs.big", "logs.b"]
    assert policies.waiting("logs.b") is None
    assert policies.admit(["logs.a"], running=["logs.big", "logs.b"]) == []


def test_pauses_from_the_config_and_the_api(settings: Settings) -> None:
    policies = Policies(settings)
    assert policies.paused("sales.orders") == "paused by policies[1] (sales.*)"
    assert policies.paused("logs.a") is None
    policies.pause("logs.a", "paused through the API")
    assert policies.paused("logs.a") == "paused through the API"
    assert policies.resume("logs.a") is None and policies.paused("logs.a") is None
    assert policies.resume("sales.orders") == "paused by policies[1] (sales.*)"
    # the policy turns merge_manifests off; [jobs] decides the others
    assert policies.enabled_jobs("sales.orders") == tuple(
        j for j in ROUTINE_JOBS if settings.job(j).enabled and j != "merge_manifests")
    assert "merge_manifests" in policies.enabled_jobs("logs.a")


def test_failed_job_is_the_first_without_a_report(settings: Settings) -> None:
    policies = Policies(settings)
    policies.record("logs.a", ("compact", "expire", "merge_manifests"),
                    {"compact": JobOutcome("success", "2 buckets")}, "CorruptFileError: x", 5.0,
                    full=False)
    records = policies.records("logs.a")
    assert records["compact"].outcome == "success"
    assert (records["expire"].outcome, records["expire"].detail) == ("failure",
                                                                     "CorruptFileError: x")
    assert "merge_manifests" not in records


def _entry(settings: Settings, standing: Standing, now: float, table: str = "logs.a",
           running: bool = False) -> dict[str, object]:
    policies = Policies(settings)
    return table_json(standing, running=running, error=None, urgency=0.5,
                      policy=policies.policy(table),
                      chosen=policies.for_run(table, {}, now),
                      schedules=policies.schedules(table), records=policies.records(table),
                      paused=policies.paused(table), waiting=policies.waiting(table), now=now)


def test_status_says_why_each_job_runs_or_not(settings: Settings) -> None:
    now = _utc(12)
    standing = Standing(last_snapshot_id=4, compacted_snapshot_id=4,
                        last_run={"compact": now - 10, "expire": now - 400},
                        refused={"tags": "fp"})
    entry: dict[str, dict[str, dict[str, object]]] = _entry(settings, standing, now)  # type: ignore[assignment]
    jobs = entry["jobs"]
    assert jobs["compact"]["why"] == "next run after interval_s=60"
    assert jobs["compact"]["next_due_at"] == now + 50
    assert jobs["expire"]["why"] == "due"
    assert str(jobs["tags"]["why"]).startswith("refused the table")
    assert jobs["remove_orphans"]["why"] == "disabled (jobs.remove_orphans.enabled)"
    assert entry["policy"]["name"] == "policies[0] (logs.*)"
    assert entry["policy"]["jobs"]["expire"]["retain_max"] == 5  # type: ignore[index]
    moved = Standing(last_snapshot_id=5, compacted_snapshot_id=4, last_run={"compact": now})
    assert _entry(settings, moved, now)["jobs"]["compact"]["why"].startswith(  # type: ignore[index]
        "due: snapshots arrived")
    paused: dict[str, dict[str, dict[str, object]]] = _entry(settings, Standing(), now, "sales.x")  # type: ignore[assignment]
    assert paused["jobs"]["compact"]["why"] == "paused by policies[1] (sales.*)"
    assert paused["jobs"]["merge_manifests"]["why"] == "disabled (policies[1] (sales.*))"
    quarantined = _entry(settings, Standing(quarantined=True, failures=5), now)
    assert "quarantined after 5 failures" in quarantined["jobs"]["expire"]["why"]  # type: ignore[index]
    text = render_text({"logs.a": entry, "sales.x": paused})
    assert "logs.a  idle; policy policies[0] (logs.*)" in text
    assert "sales.x  paused" in text and "expire.retain_max from policies[0]" in text
    assert "<pre>" in render_html({"a.b": entry}) and "<script" not in render_html(
        {"<script>.x": entry})


@pytest.mark.parametrize(("runs", "debt", "limit", "admitted", "why"), [
    (2, 0, None, True, "at most 2 sorted runs"),
    (3, 0, None, False, "at or past the stop trigger 3"),
    (4, 0, None, False, "at or past the stop trigger 3"),
    (2, 2048, 1024, False, "compaction debt 2048 bytes is over 1024"),
    (2, 1024, 1024, True, "at most 2 sorted runs"),
])
def test_admission_rule(runs: int, debt: int, limit: int | None, admitted: bool,
                        why: str) -> None:
    answer = admit("db.t", 9, Figures(runs, 3, 2, debt), limit)
    assert answer.admitted is admitted and why in answer.reason
    assert answer.to_json()["snapshot_id"] == 9
    # an append table: its writers never stall, only the debt limit holds them back
    append = admit("db.t", 9, Figures(runs, 3, 2, debt, primary_key=False), limit)
    assert append.admitted is (limit is None or debt <= limit)
