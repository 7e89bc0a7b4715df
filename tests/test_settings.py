"""Settings: file + environment, validated, with errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from paimond.config.settings import load_settings
from paimond.errors import ConfigError

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
    settings = load_settings(_write(tmp_path, GOOD), env={})
    assert settings.warehouses[0].uri == "s3://bucket/wh"
    assert settings.warehouses[0].storage_options == {"endpoint_url": "http://127.0.0.1:9000"}
    assert settings.job("compact").interval_s == 30 and settings.job("compact").options == {"full": False}
    orphans = settings.job("remove_orphans")
    assert orphans.enabled and orphans.options["older_than"] == "2d"
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
    settings = load_settings(_write(tmp_path, GOOD), env=env)
    assert settings.http_port == 9400 and settings.concurrency == 1
    assert settings.job("compact").interval_s == 5
    assert [w.uri for w in settings.warehouses] == ["s3://bucket/wh", "/data/wh2"]
    assert settings.trigger_token == "s3cr3t"
    assert "s3cr3t" not in repr(settings)
    assert load_settings(None, env={"PAIMOND_WAREHOUSE": "/wh", "PAIMOND_TRIGGER_TOKEN": "t"}
                         ).trigger_token == "t"


def test_yaml(tmp_path: Path) -> None:
    path = _write(tmp_path, "warehouses:\n  - uri: /wh\nlimits:\n  concurrency: 4\n", "p.yaml")
    assert load_settings(path, env={}).concurrency == 4


@pytest.mark.parametrize("text, key", [
    ("", "warehouses"),
    ("[[warehouses]]\nuri = 3\n", "warehouses[0].uri"),
    ('[[warehouses]]\nuri = "/w"\n[limits]\nconcurrency = 0\n', "limits.concurrency"),
    ('[[warehouses]]\nuri = "/w"\n[limits]\nconcurrency = "many"\n', "limits.concurrency"),
    ('[[warehouses]]\nuri = "/w"\n[http]\nport = -1\n', "http.port"),
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
])
def test_bad_config_names_the_key(tmp_path: Path, text: str, key: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(_write(tmp_path, text), env={})
    assert key in error.value.key


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings(str(tmp_path / "nope.toml"), env={})


def test_lookup_cache_settings(tmp_path: Path) -> None:
    config = tmp_path / "paimond.toml"
    config.write_text('[[warehouses]]\nuri = "/wh"\n[lookup_cache]\n'
                      'directory = "/var/cache/paimond"\nmax_size_mb = 256\n')
    settings = load_settings(str(config), env={})
    assert settings.lookup_cache_dir == "/var/cache/paimond"
    assert settings.lookup_cache_max_mb == 256
    assert load_settings(None, env={"PAIMOND_WAREHOUSE": "/wh"}).lookup_cache_dir is None
    overridden = load_settings(str(config), env={"PAIMOND_LOOKUP_CACHE_MAX_SIZE_MB": "64"})
    assert overridden.lookup_cache_max_mb == 64
    config.write_text('[[warehouses]]\nuri = "/wh"\n[lookup_cache]\nmax_size = 5\n')
    with pytest.raises(ConfigError, match="lookup_cache.max_size"):
        load_settings(str(config), env={})
