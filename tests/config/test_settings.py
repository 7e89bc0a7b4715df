"""Settings: file + environment, validated, with errors naming the key."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from paimond.cli.main import main
from paimond.config.settings import load_settings
from paimond.config.values import duration_ms
from paimond.durations import UNITS_MS as DURATION_UNITS_MS
from paimond.errors import ConfigError
from paimond.maintenance.jobs import ROUTINE, CompactSettings, ExpireOverrides, OrphanSettings
from paimond.table.options.reader import parse_duration_millis

GOOD = """
[[warehouses]]
uri = "s3://bucket/wh"
storage_options = { endpoint_url = "http://127.0.0.1:9000" }

[tables]
include = ["sales.*", "ops.events"]
exclude = ["sales.tmp_*"]

[jobs.compact]
interval_s = 30
full = false

[jobs.remove_orphans]
enabled = true
older_than = "2d"

[limits]
concurrency = 3

[http]
port = 9300
"""


def _write(tmp_path: Path, text: str, name: str = "paimond.toml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_file_and_defaults(tmp_path: Path) -> None:
    settings = load_settings(_write(tmp_path, GOOD), env={}, jobs=ROUTINE)
    assert settings.warehouses[0].uri == "s3://bucket/wh"
    assert settings.warehouses[0].storage_options == {"endpoint_url": "http://127.0.0.1:9000"}
    assert settings.job("compact").interval_s == 30
    assert settings.job("compact").settings == CompactSettings(full=False, parallelism=1)
    orphans = settings.job("remove_orphans")
    assert orphans.enabled and orphans.settings == OrphanSettings(older_than_ms=2 * 86_400_000)
    assert settings.job("expire").enabled and settings.job("expire").interval_s == 300
    assert (settings.concurrency, settings.http_port, settings.log_format) == (3, 9300, "auto")
    assert settings.wants("sales.orders") and settings.wants("ops.events")
    assert not settings.wants("sales.tmp_x") and not settings.wants("ops.other")
    assert settings.trigger_token is None


def test_environment_overrides(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cr3t\n")
    env = {"PAIMOND_HTTP_PORT": "9400", "PAIMOND_JOBS_COMPACT_INTERVAL_S": "5",
           "PAIMOND_LIMITS_CONCURRENCY": "1", "PAIMOND_WAREHOUSE": "/data/wh2",
           "PAIMOND_HTTP_TRIGGER_TOKEN_FILE": str(token_file), "OTHER": "x"}
    settings = load_settings(_write(tmp_path, GOOD), env=env, jobs=ROUTINE)
    assert settings.http_port == 9400 and settings.concurrency == 1
    assert settings.job("compact").interval_s == 5
    assert [w.uri for w in settings.warehouses] == ["s3://bucket/wh", "/data/wh2"]
    assert settings.trigger_token == "s3cr3t"
    assert "s3cr3t" not in repr(settings)
    assert load_settings(None, env={"PAIMOND_WAREHOUSE": "/wh", "PAIMOND_TRIGGER_TOKEN": "t"},
                         jobs=ROUTINE).trigger_token == "t"


def test_yaml(tmp_path: Path) -> None:
    path = _write(tmp_path, "warehouses:\n  - uri: /wh\nlimits:\n  concurrency: 4\n", "p.yaml")
    assert load_settings(path, env={}, jobs=ROUTINE).concurrency == 4


@pytest.mark.parametrize("text, key", [
    ("", "warehouses"),
    ("[[warehouses]]\nuri = 3\n", "warehouses[0].uri"),
    ('[[warehouses]]\nuri = "/w"\n[limits]\nconcurrency = 0\n', "limits.concurrency"),
    ('[[warehouses]]\nuri = "/w"\n[limits]\nconcurrency = "many"\n', "limits.concurrency"),
    ('[[warehouses]]\nuri = "/w"\n[http]\nport = -1\n', "http.port"),
    ('[[warehouses]]\nuri = "/w"\n[http]\nport = 70000\n', "http.port"),  # no traceback
    ('[[warehouses]]\nuri = "/w"\n[jobs.vacuum]\nenabled = true\n', "jobs.vacuum"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.compact]\nenabled = "maybe"\n', "jobs.compact.enabled"),
    ('[[warehouses]]\nuri = "/w"\n[log]\nformat = "xml"\n', "log.format"),
    ('[[warehouses]]\nuri = "/w"\n[surprise]\n', "surprise"),
    ('[[warehouses]]\nuri = "s3://b"\nstorage_options = { secret = "x" }\n',
     "warehouses[0].storage_options.secret"),
    ('[[warehouses]]\nuri = "/w"\n[http]\ntrigger_token_file = "/no/such/file"\n',
     "http.trigger_token_file"),
    ("[[warehouses]\n", "paimond.toml"),
    ('[[warehouses]]\nuri = "/w"\n[limits]\nconcurency = 2\n', "limits.concurency"),
    ('[[warehouses]]\nuri = "/w"\n[limits]\nper_table = 2\n', "limits.per_table"),
    ('[[warehouses]]\nuri = "/w"\n[limits]\nper_table = "one"\n', "limits.per_table"),
    ('executor = "yarn"\n[[warehouses]]\nuri = "/w"\n', "executor"),
    # TOML: a key after [[warehouses]] belongs to the warehouse, where it is unknown.
    ('[[warehouses]]\nuri = "/w"\nexecutor = "spark"\n', "warehouses[0].executor"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.compact]\nfulll = true\n', "jobs.compact.fulll"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.compact]\nfull = "sometimes"\n', "jobs.compact.full"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.compact]\nparallelism = 0\n', "jobs.compact.parallelism"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.compact]\nparallelism = 2.5\n',
     "jobs.compact.parallelism"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.merge_manifests]\nolder_than = "1d"\n',
     "jobs.merge_manifests.older_than"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.expire]\nretain_max = -1\n', "jobs.expire.retain_max"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.expire]\nretain_min = 0\n', "jobs.expire.retain_min"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.expire]\nretain_min = 5\nretain_max = 3\n',
     "jobs.expire.retain_max"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.expire]\nmax_deletes = -5\n', "jobs.expire.max_deletes"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.expire]\nolder_than = "2 weeks"\n',
     "jobs.expire.older_than"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.expire]\nolder_than = true\n', "jobs.expire.older_than"),
    ('[[warehouses]]\nuri = "/w"\n[jobs.remove_orphans]\nolder_than = "-1 d"\n',
     "jobs.remove_orphans.older_than"),
    # The daemon never forces a window under one hour: it would fail on every table.
    ('[[warehouses]]\nuri = "/w"\n[jobs.remove_orphans]\nolder_than = "30 min"\n',
     "jobs.remove_orphans.older_than"),
    ('jobs = { compact = 3 }\n[[warehouses]]\nuri = "/w"\n', "jobs.compact"),
])
def test_bad_config_names_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(_write(tmp_path, text), env={}, jobs=ROUTINE)
    assert key in error.value.key


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(str(tmp_path / "nope.toml"), env={}, jobs=ROUTINE)


def test_lookup_cache_settings(tmp_path: Path) -> None:
    config = tmp_path / "paimond.toml"
    config.write_text('[[warehouses]]\nuri = "/wh"\n[lookup_cache]\n'
                      'directory = "/var/cache/paimond"\nmax_size_mb = 256\n')
    settings = load_settings(str(config), env={}, jobs=ROUTINE)
    assert settings.lookup_cache_dir == "/var/cache/paimond"
    assert settings.lookup_cache_max_mb == 256
    assert load_settings(None, env={"PAIMOND_WAREHOUSE": "/wh"}, jobs=ROUTINE).lookup_cache_dir is None
    overridden = load_settings(str(config), env={"PAIMOND_LOOKUP_CACHE_MAX_SIZE_MB": "64"}, jobs=ROUTINE)
    assert overridden.lookup_cache_max_mb == 64
    config.write_text('[[warehouses]]\nuri = "/wh"\n[lookup_cache]\nmax_size = 5\n')
    with pytest.raises(ConfigError, match="lookup_cache.max_size"):
        load_settings(str(config), env={}, jobs=ROUTINE)


def test_job_sections_are_typed(tmp_path: Path) -> None:
    path = _write(tmp_path, '[[warehouses]]\nuri = "/w"\n[jobs.compact]\nfull = true\n'
                            'parallelism = 4\n[jobs.expire]\nretain_min = 2\nretain_max = 20\n'
                            'older_than = "30 min"\nmax_deletes = 7\n')
    settings = load_settings(path, env={}, jobs=ROUTINE)
    assert settings.job("compact").settings == CompactSettings(full=True, parallelism=4)
    assert settings.job("expire").settings == ExpireOverrides(
        retain_min=2, retain_max=20, older_than_ms=1_800_000, max_deletes=7)
    merge = settings.job("merge_manifests")
    assert merge.enabled and merge.interval_s == 600 and merge.settings.forced is False
    assert settings.job("remove_orphans").settings == OrphanSettings()
    assert not settings.job("remove_orphans").enabled
    defaults = load_settings(None, env={"PAIMOND_WAREHOUSE": "/w"}, jobs=ROUTINE)
    assert defaults.job("expire").settings == ExpireOverrides()  # None: the table's own options
    with pytest.raises(KeyError):
        defaults.job("vacuum")


@pytest.mark.parametrize("text, full", [
    ("false", False), ("FALSE", False), ("0", False), ("no", False), (" No ", False),
    ("true", True), ("True", True), ("1", True), ("yes", True), ("YES", True),
])
def test_environment_booleans(tmp_path: Path, text: str, full: bool) -> None:
    path = _write(tmp_path, '[[warehouses]]\nuri = "/w"\n[jobs.compact]\nfull = true\n')
    settings = load_settings(path, env={"PAIMOND_JOBS_COMPACT_FULL": text}, jobs=ROUTINE)
    assert settings.job("compact").settings.full is full


@pytest.mark.parametrize("env, key", [
    ({"PAIMOND_JOBS_COMPACT_FULL": "maybe"}, "PAIMOND_JOBS_COMPACT_FULL"),
    ({"PAIMOND_JOBS_COMPACT_FULL": ""}, "PAIMOND_JOBS_COMPACT_FULL"),
    ({"PAIMOND_JOBS_COMPACT_FULLL": "true"}, "PAIMOND_JOBS_COMPACT_FULLL"),
    ({"PAIMOND_JOBS_VACUUM_ENABLED": "true"}, "PAIMOND_JOBS_VACUUM_ENABLED"),
    ({"PAIMOND_JOBS_EXPIRE_RETAIN_MAX": "-1"}, "PAIMOND_JOBS_EXPIRE_RETAIN_MAX"),
    ({"PAIMOND_JOBS_EXPIRE_OLDER_THAN": "soon"}, "PAIMOND_JOBS_EXPIRE_OLDER_THAN"),
    ({"PAIMOND_HTTP_PORTT": "1"}, "PAIMOND_HTTP_PORTT"),
    ({"PAIMOND_LIMITS_PER_TABLE": "abc"}, "PAIMOND_LIMITS_PER_TABLE"),
    ({"PAIMOND_EXECUTOR": "yarn"}, "PAIMOND_EXECUTOR"),
    ({"PAIMOND_WAREHOUSE": ""}, "PAIMOND_WAREHOUSE"),
])
def test_bad_environment_names_the_variable(env: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(None, env={"PAIMOND_WAREHOUSE": "/w", **env}, jobs=ROUTINE)
    assert error.value.key == key


def test_other_paimond_variables_are_not_settings() -> None:
    # Read elsewhere (storage, tests) or injected by Kubernetes service links.
    env = {"PAIMOND_WAREHOUSE": "/w", "PAIMOND_S3_ENDPOINT_URL": "http://s3",
           "PAIMOND_TESTS_WITHOUT_ORACLES": "1", "PAIMOND_SERVICE_HOST": "10.0.0.1"}
    assert load_settings(None, env=env, jobs=ROUTINE).executor == "local"


def test_executor_from_file_and_environment(tmp_path: Path) -> None:
    path = _write(tmp_path, 'executor = "spark"\n[[warehouses]]\nuri = "/w"\n')
    assert load_settings(path, env={}, jobs=ROUTINE).executor == "spark"
    assert load_settings(path, env={"PAIMOND_EXECUTOR": "local"}, jobs=ROUTINE).executor == "local"
    assert load_settings(None, env={"PAIMOND_WAREHOUSE": "/w",
                                    "PAIMOND_EXECUTOR": "Spark"}, jobs=ROUTINE).executor == "spark"


@pytest.mark.parametrize("command", ["run", "run-once"])
@pytest.mark.parametrize("text, env, key", [
    ('[jobs.compact]\nfulll = true\n', {}, "jobs.compact.fulll"),
    ("", {"PAIMOND_JOBS_COMPACT_FULL": "nope"}, "PAIMOND_JOBS_COMPACT_FULL"),
    ('[jobs.expire]\nolder_than = "2 weeks"\n', {}, "jobs.expire.older_than"),
    ('[jobs.expire]\nretain_max = -3\n', {}, "jobs.expire.retain_max"),
    ("", {"PAIMOND_EXECUTOR": "yarn"}, "PAIMOND_EXECUTOR"),
])
def test_daemon_commands_exit_2_naming_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        command: str, text: str, env: dict[str, str], key: str) -> None:
    path = _write(tmp_path, f'[[warehouses]]\nuri = "{tmp_path / "wh"}"\n{text}')
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert main([command, "--config", path]) == 2
    assert key in capsys.readouterr().err
    assert not (tmp_path / "wh").exists()  # refused before anything ran


@pytest.mark.parametrize("text", [f"3 {unit}".strip() for unit in DURATION_UNITS_MS]
                         + ["7", " 2 D ", "10MIN"])
def test_durations_read_as_table_options_do(text: str) -> None:
    # config may not import table/: its copy of Paimon's duration grammar must agree.
    assert duration_ms(text, "k") == parse_duration_millis(text)


@pytest.mark.parametrize("text", ["", "d", "1 week", "1.5 h", "-1 s", "1 h 30 min"])
def test_bad_durations_are_refused_as_table_options_are(text: str) -> None:
    with pytest.raises(ConfigError):
        duration_ms(text, "k")
    with pytest.raises(ValueError):
        parse_duration_millis(text)


def test_the_daemons_job_sections_are_the_routine_jobs_it_is_given() -> None:
    settings = load_settings(None, env={"PAIMOND_WAREHOUSE": "/w"}, jobs=ROUTINE)
    assert settings.jobs.names == tuple(job.name for job in ROUTINE)
    only = load_settings(None, env={"PAIMOND_WAREHOUSE": "/w"}, jobs=ROUTINE[1:2])
    assert only.jobs.names == ("compact",)
    with pytest.raises(ConfigError) as error:
        load_settings(None, env={"PAIMOND_WAREHOUSE": "/w", "PAIMOND_JOBS_EXPIRE_ENABLED": "1"},
                      jobs=ROUTINE[1:2])
    assert error.value.key == "PAIMOND_JOBS_EXPIRE_ENABLED"


def test_replica_id(tmp_path: Path) -> None:
    """The daemon's stable identity: the file's key, else the pod's name, else the hostname;
    ``PAIMOND_DAEMON_REPLICA_ID`` overrides the file."""
    warehouse = {"PAIMOND_WAREHOUSE": "/wh"}
    assert load_settings(None, env=warehouse, jobs=ROUTINE).replica_id == socket.gethostname()
    pod = load_settings(None, env=warehouse | {"POD_NAME": "paimond-0"}, jobs=ROUTINE)
    assert pod.replica_id == "paimond-0"
    config = tmp_path / "r.toml"
    config.write_text('[[warehouses]]\nuri = "/wh"\n[daemon]\nreplica_id = "east-1"\n')
    assert load_settings(str(config), env={"POD_NAME": "paimond-0"}, jobs=ROUTINE).replica_id == "east-1"
    overridden = load_settings(str(config), env={"PAIMOND_DAEMON_REPLICA_ID": "west-2"}, jobs=ROUTINE)
    assert overridden.replica_id == "west-2"
    config.write_text('[[warehouses]]\nuri = "/wh"\n[daemon]\nreplica_id = "a/b"\n')
    with pytest.raises(ConfigError) as error:
        load_settings(str(config), env={}, jobs=ROUTINE)
    assert error.value.key == "daemon.replica_id"
