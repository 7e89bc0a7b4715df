"""``[[policies]]``: job sections laid over ``[jobs]``, first match wins, errors name
``policies[i].key``."""

from __future__ import annotations

from pathlib import Path

import pytest

from paimond.config.settings import Settings, load_settings
from paimond.errors import ConfigError
from paimond.maintenance.jobs import ROUTINE

BASE = """
[[warehouses]]
uri = "/tmp/wh"
[jobs.compact]
interval_s = 30
parallelism = 2
[jobs.expire]
retain_min = 3
"""

TWO = BASE + """
[[policies]]
tables = ["logs.*", "tmp.scratch"]
concurrency = 1
full_compaction_window = "22:30-02:00"
max_compaction_debt_mb = 256
[policies.jobs.compact]
interval_s = 5
[policies.jobs.expire]
retain_max = 20
older_than = "2 h"
[policies.jobs.remove_orphans]
enabled = true
older_than = "3 d"

[[policies]]
tables = ["logs.big", "sales.*"]
paused = "yes"
"""


def _load(tmp_path: Path, text: str) -> Settings:
    path = tmp_path / "paimond.toml"
    path.write_text(text)
    return load_settings(str(path), env={}, jobs=ROUTINE)


def test_two_policies_first_match_wins_over_jobs(tmp_path: Path) -> None:
    settings = _load(tmp_path, TWO)
    logs, sales = settings.policy("logs.big"), settings.policy("sales.orders")
    assert logs is not None and sales is not None
    assert settings.policy("other.t") is None
    assert logs.index == 0 and sales.index == 1  # logs.big: the first match, not paused
    assert not logs.paused and sales.paused
    # the policy's keys over [jobs]; what it does not name stays [jobs]'s
    compact, expire = logs.jobs.by_name("compact"), logs.jobs.by_name("expire").settings
    assert compact.interval_s == 5 and compact.settings.parallelism == 2
    assert expire.retain_min == 3 and expire.retain_max == 20
    assert expire.older_than_ms == 7_200_000
    orphans = logs.jobs.by_name("remove_orphans")
    assert orphans.enabled and orphans.settings.older_than_ms == 3 * 86_400_000
    assert logs.overrides == {("compact", "interval_s"), ("expire", "retain_max"),
                              ("expire", "older_than"), ("remove_orphans", "enabled"),
                              ("remove_orphans", "older_than")}
    assert logs.concurrency == 1 and logs.max_compaction_debt_mb == 256
    assert logs.full_compaction_window == (22 * 60 + 30, 120)
    # a policy without job sections is [jobs] itself
    assert sales.jobs == settings.jobs
    assert settings.policy("tmp.scratch") is logs


@pytest.mark.parametrize(("policy", "key"), [
    ('tables = ["a.*"]\ncolour = 1', "policies[0].colour"),
    ("paused = true", "policies[0].tables"),
    ("tables = []", "policies[0].tables"),
    ('tables = ["a.*"]\nconcurrency = 0', "policies[0].concurrency"),
    ('tables = ["a.*"]\nfull_compaction_window = "25:00-26:00"', "policies[0].full_compaction_window"),
    ('tables = ["a.*"]\nfull_compaction_window = "01:00-01:00"', "policies[0].full_compaction_window"),
    ('tables = ["a.*"]\nfull_compaction_window = "1am"', "policies[0].full_compaction_window"),
    ('tables = ["a.*"]\npaused = "maybe"', "policies[0].paused"),
    ('tables = ["a.*"]\n[policies.jobs.compact]\nfull = "sometimes"', "policies[0].jobs.compact.full"),
    ('tables = ["a.*"]\n[policies.jobs.compact]\nretain_max = 2', "policies[0].jobs.compact.retain_max"),
    ('tables = ["a.*"]\n[policies.jobs.vacuum]\nenabled = true', "policies[0].jobs.vacuum"),
    # below [jobs]' retain_min = 3: the policy's value is at fault
    ('tables = ["a.*"]\n[policies.jobs.expire]\nretain_max = 2', "policies[0].jobs.expire.retain_max"),
    ('tables = ["a.*"]\n[policies.jobs.remove_orphans]\nolder_than = "10 min"',
     "policies[0].jobs.remove_orphans.older_than"),
])
def test_a_bad_policy_names_its_key(tmp_path: Path, policy: str, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, BASE + "[[policies]]\n" + policy + "\n")
    assert raised.value.key == key


def test_policies_must_be_a_list(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        _load(tmp_path, BASE + "[policies]\ntables = ['a.*']\n")
    assert raised.value.key == "policies"


def test_policies_are_not_set_from_the_environment(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        load_settings(None, env={"PAIMOND_WAREHOUSE": "/tmp/wh", "PAIMOND_POLICIES_PAUSED": "1"},
                      jobs=ROUTINE)
    assert raised.value.key == "PAIMOND_POLICIES_PAUSED"
