"""The config reference is rendered from the declarations the loader parses with: every key
has a doc, and a key declared on a job's settings type is a key of its section and a row of
the reference."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from paimond.cli.config_reference import render_markdown
from paimond.config import reference
from paimond.config.declare import declared_fields, setting, undeclared
from paimond.config.policy import POLICY_KEYS
from paimond.config.settings import ENVIRONMENT, KEYS, Settings, load_settings
from paimond.errors import ConfigError
from paimond.maintenance.jobs import JOBS, ROUTINE


def test_every_key_has_a_doc() -> None:
    for key in (*KEYS, *POLICY_KEYS):
        assert key.declared.doc.strip(), key.name
    for job in JOBS.values():
        assert undeclared(job.settings_type) == [], job.name  # every field is declared
        for f in declared_fields(job.settings_type):
            assert f.declared.doc.strip(), f"{job.name}.{f.name}"
    assert all(doc.strip() for _, doc in ENVIRONMENT)


def test_the_reference_has_every_section_key_and_variable() -> None:
    text = render_markdown()
    for key in (*KEYS, *POLICY_KEYS):
        assert f"| `{key.leaf}` |" in text, key.name
        assert key.declared.doc in text
    for job in ROUTINE:
        assert f"## `[jobs.{job.name}]`" in text
        section = text.split(f"## `[jobs.{job.name}]`")[1].split("\n## ")[0]
        for f in declared_fields(job.settings_type):
            assert (f"| `{f.key}` |" in section) is f.declared.daemon, f"{job.name}.{f.name}"
    assert "| `older_than` | duration (optional) | unset | >= 3600 s |" in text  # orphans
    assert "| `parallelism` | int | 1 | >= 1 |" in text  # compact: the daemon's default
    for name, _ in ENVIRONMENT:
        assert f"`{name}`" in text


def test_every_settings_attribute_comes_from_a_declared_key() -> None:
    filled = {k.attr for k in KEYS if k.attr is not None}
    by_hand = {"warehouses", "include", "exclude", "jobs", "trigger_token", "lookup_cache_dir",
               "replica_id", "policies"}
    assert filled | by_hand == {f.name for f in dataclasses.fields(Settings)}


@dataclass(frozen=True, slots=True)
class _VacuumSettings:
    depth: int = setting(3, "how deep the vacuum reaches", minimum=1, daemon=True)
    noisy: bool = setting(False, "a setting of the job that no daemon section sets")


@dataclass(frozen=True, slots=True)
class _Vacuum:
    name: str = "vacuum"
    settings_type: type = _VacuumSettings
    enabled: bool = False
    interval_s: float = 120.0


def test_a_key_added_to_a_settings_type_is_loaded_and_documented() -> None:
    text = reference.render_markdown([_Vacuum()])
    assert "## `[jobs.vacuum]`" in text
    assert "| `depth` | int | 3 | >= 1 | how deep the vacuum reaches |" in text
    assert "| `interval_s` | float | 120 | >= 1 |" in text and "noisy" not in text
    env = {"PAIMOND_WAREHOUSE": "/w", "PAIMOND_JOBS_VACUUM_DEPTH": "7"}
    section = load_settings(None, env=env, jobs=[_Vacuum()]).job("vacuum")
    assert section.settings == _VacuumSettings(depth=7) and not section.enabled
    with pytest.raises(ConfigError) as error:
        load_settings(None, env={**env, "PAIMOND_JOBS_VACUUM_NOISY": "1"}, jobs=[_Vacuum()])
    assert error.value.key == "PAIMOND_JOBS_VACUUM_NOISY"  # not a daemon key: refused
    with pytest.raises(ConfigError) as error:
        load_settings(None, env={**env, "PAIMOND_JOBS_VACUUM_DEPTH": "0"}, jobs=[_Vacuum()])
    assert "must be a int >= 1" in error.value.reason
