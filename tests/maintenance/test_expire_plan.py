"""The expiration range from metadata alone (Java ``ExpireSnapshotsImpl.expire``), settings from
table options, durations, and the refusal of decoupled changelogs."""

from __future__ import annotations

import datetime
import math

import pytest

from paimond.errors import ConfigError
from paimond.maintenance.expire.consumers import (
    ConsumerExpireResult,
    ConsumerFile,
    plan_consumer_expiry,
)
from paimond.maintenance.expire.references import FileTally
from paimond.maintenance.expire.snapshots import (
    INT_MAX,
    ExpireResult,
    ExpireSettings,
    SnapshotHistory,
    changelog_decoupled,
    plan_expiration,
)
from paimond.table.options.core import TableOptions
from paimond.table.options.reader import parse_duration_millis as parse_duration_ms

HOUR_MS = 3_600_000
NOW = 1_000 * HOUR_MS


def history(earliest: int, latest: int, *, ages_h: dict[int, float] | None = None,
            consumer: int | None = None, hint: bool = True) -> SnapshotHistory:
    """Snapshots ``earliest..latest``, each committed ``ages_h[id]`` hours before NOW (default:
    a day old)."""
    times = {i: NOW - int((ages_h or {}).get(i, 24) * HOUR_MS) for i in range(earliest, latest + 1)}
    return SnapshotHistory(earliest, latest, hint, consumer, times)


def end_of(h: SnapshotHistory, **settings: int) -> tuple[int | None, str]:
    plan = plan_expiration("db.t", h, ExpireSettings(**settings), NOW)
    return plan.end_id, plan.bound


def test_retain_min_keeps_the_newest() -> None:
    assert end_of(history(1, 20), retain_min=10) == (11, "retain-min")
    assert end_of(history(1, 5), retain_min=10) == (-4, "retain-min")  # nothing expires
    assert not plan_expiration("db.t", history(1, 5), ExpireSettings(), NOW).expires


def test_expire_limit_caps_one_run() -> None:
    assert end_of(history(3, 200), retain_min=1, max_deletes=50) == (53, "expire-limit")


def test_time_retained_stops_at_the_first_young_successor() -> None:
    # Snapshot 8 is half an hour old: 7 must stay (its successor is young), 1..6 go.
    h = history(1, 20, ages_h={i: 0.5 for i in range(8, 21)})
    assert end_of(h, retain_min=1) == (7, "time-retained")
    assert end_of(h, retain_min=1, time_retained_ms=10 * 60_000) == (20, "retain-min")


def test_retain_max_expires_old_snapshots_regardless_of_age() -> None:
    young = history(1, 20, ages_h={i: 0 for i in range(1, 21)})
    assert end_of(young, retain_min=1) == (1, "time-retained")  # nothing is old enough
    assert end_of(young, retain_min=1, retain_max=5)[0] == 16  # min = 20 - 5 + 1


def test_consumers_protect_their_next_snapshot_and_later() -> None:
    assert end_of(history(1, 20, consumer=6), retain_min=1) == (6, "consumer")
    assert end_of(history(1, 20, consumer=1), retain_min=1)[0] == 1
    assert end_of(history(1, 20, consumer=99), retain_min=1) == (20, "retain-min")


def test_missing_snapshots_in_the_range_are_skipped_like_java() -> None:
    h = history(1, 10, ages_h={5: 0})
    del h.time_millis[5]  # expired meanwhile by another process
    assert end_of(h, retain_min=1) == (10, "retain-min")


def test_earliest_hint_is_written_when_missing_even_if_nothing_expires() -> None:
    plan = plan_expiration("db.t", history(4, 5, hint=False), ExpireSettings(), NOW)
    assert not plan.expires and plan.write_earliest_hint
    plan = plan_expiration("db.t", history(4, 5, hint=True), ExpireSettings(), NOW)
    assert not plan.write_earliest_hint


def test_invalid_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="at least 1"):
        plan_expiration("db.t", history(1, 5), ExpireSettings(retain_min=0), NOW)
    with pytest.raises(ConfigError, match="must not be less"):
        plan_expiration("db.t", history(1, 5), ExpireSettings(retain_min=5, retain_max=2), NOW)


def test_settings_come_from_table_options_with_java_defaults() -> None:
    assert ExpireSettings.of(TableOptions({})) == ExpireSettings(10, INT_MAX, HOUR_MS, 50, False)
    options = TableOptions({"snapshot.num-retained.min": "3", "snapshot.num-retained.max": "7",
                            "snapshot.time-retained": "30 min", "snapshot.expire.limit": "4",
                            "snapshot.expire.clean-empty-directories": "true"})
    assert ExpireSettings.of(options) == ExpireSettings(3, 7, 1_800_000, 4, True)
    with pytest.raises(ConfigError, match="snapshot.time-retained"):
        ExpireSettings.of(TableOptions({"snapshot.time-retained": "soon"}))


@pytest.mark.parametrize(("text", "millis"), [
    ("1 h", HOUR_MS), ("30min", 1_800_000), ("2d", 172_800_000), ("500", 500), ("10 s", 10_000),
    ("3 days", 259_200_000), ("15 ms", 15)])
def test_durations(text: str, millis: int) -> None:
    assert parse_duration_ms(text) == millis


@pytest.mark.parametrize("text", ["", "h", "1 fortnight", "-1 h", "1.5 h"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def test_changelog_decoupled_like_java() -> None:
    settings = ExpireSettings()
    assert not changelog_decoupled(TableOptions({}), settings)
    assert not changelog_decoupled(TableOptions({"changelog.num-retained.min": "10"}), settings)
    assert changelog_decoupled(TableOptions({"changelog.num-retained.min": "11"}), settings)
    assert changelog_decoupled(TableOptions({"changelog.num-retained.max": "100"}),
                               ExpireSettings(retain_max=50))
    assert changelog_decoupled(TableOptions({"changelog.time-retained": "2 h"}), settings)


def _quiet(h: SnapshotHistory, **settings: int) -> float | None:
    """How long a run that planned ``h`` stays without work at the same snapshot
    (ExpireResult.quiet_until_ms; the daemon's duty_skip)."""
    plan = plan_expiration("db.t", h, ExpireSettings(**settings), NOW)
    return ExpireResult(plan, None, FileTally(), dry_run=False).quiet_until_ms()


def test_an_expiry_with_nothing_to_do_says_until_when_it_stays_so() -> None:
    # held by the count: only a new snapshot changes it
    assert _quiet(history(1, 5)) == math.inf
    # held by age: snapshot 7 goes once its successor, 8, is older than the retention
    h = history(1, 20, ages_h={i: 0.5 for i in range(1, 21)})
    assert end_of(h, retain_min=1) == (1, "time-retained")
    assert _quiet(h, retain_min=1) == h.time_millis[2] + HOUR_MS + 1
    later = plan_expiration("db.t", h, ExpireSettings(retain_min=1), h.time_millis[2] + HOUR_MS)
    assert not later.expires, "not a millisecond before"
    assert plan_expiration("db.t", h, ExpireSettings(retain_min=1),
                           h.time_millis[2] + HOUR_MS + 1).expires
    # held by a consumer (it moves without a snapshot), or with work to do: no quiet
    assert _quiet(history(1, 20, consumer=1), retain_min=1) is None
    assert _quiet(history(1, 20), retain_min=1) is None
    assert _quiet(history(4, 5, hint=False)) == math.inf, "the hint written, nothing is left"


def test_consumer_expiry_stays_quiet_until_the_oldest_consumer_is_old_enough() -> None:
    def quiet(expiration_ms: int | None, *modified: int | None) -> float | None:
        consumers = tuple(ConsumerFile(f"c{i}", f"/c{i}", 1, m) for i, m in enumerate(modified))
        local = datetime.datetime.fromtimestamp(NOW / 1000)
        plan = plan_consumer_expiry("db.t", consumers, expiration_ms, local)
        return ConsumerExpireResult(plan, ()).quiet_until_ms()

    assert quiet(None, NOW - 5 * HOUR_MS) == math.inf, "consumer.expiration-time unset"
    assert quiet(HOUR_MS) == math.inf, "no consumer"
    young, younger = NOW - HOUR_MS // 2, NOW - HOUR_MS // 4
    assert quiet(HOUR_MS, younger, young, None) == young + HOUR_MS + 1
    assert quiet(HOUR_MS, NOW - 2 * HOUR_MS) is None, "one expires now"
