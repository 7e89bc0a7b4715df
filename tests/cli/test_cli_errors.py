"""Usage and configuration errors exit 2 from every command, with a one-line message
and no traceback. The commands are enumerated from the argparse parser, so a new command is
covered without editing this file: a bad ``--table``, an unknown table, a warehouse that does
not exist, a malformed ``--storage-option``, a ``--partition`` key that is not a partition
key; and ``trigger --token-file`` on a missing file, ``run`` on a taken port (the exit code
systemd is told not to restart on)."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pypaimon import Schema
from support.pypaimon_tables import catalog_for
from support.table_history import tree

from paimond.cli.common import EXIT_USAGE
from paimond.cli.daemon import EXIT_CONFIG
from paimond.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
SERVICE_FILE = ROOT / "deploy" / "systemd" / "paimond.service"
TABLE = "db.parts"
NO_SUCH_URL = "http://127.0.0.1:9"  # never contacted: the arguments are refused first


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("paimond has no subcommands")


COMMANDS = _commands()


def _options(command: str) -> set[str]:
    return {s for a in COMMANDS[command]._actions for s in a.option_strings}


def _argv(command: str, warehouse: str, table: str | None) -> list[str]:
    """The command with its positionals and required options filled in, ``--table table``."""
    argv = [command]
    for action in COMMANDS[command]._actions:
        if not action.option_strings:
            argv.append(NO_SUCH_URL if action.dest == "url" else warehouse)
        elif action.required and "--table" not in action.option_strings:
            argv += [action.option_strings[0], "t1"]
    if table is not None:
        argv += ["--table", table]
    return argv


def _with(option: str) -> list[str]:
    return sorted(c for c in COMMANDS if option in _options(c))


def test_the_enumeration_sees_the_commands() -> None:
    """A guard against an enumeration that finds nothing (then every loop passes)."""
    assert {"status", "compact", "expire-snapshots", "run", "run-once", "trigger",
            "create-tag", "rebuild-dv"} <= set(COMMANDS)
    assert set(_with("--table")) >= {"status", "compact", "trigger", "delete-tag"}
    assert set(_with("--partition")) >= {"compact", "rewrite-index", "rebuild-dv"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse with one partitioned primary-key table (partition key ``dt``)."""
    warehouse = tmp_path_factory.mktemp("cli_errors") / "wh"
    catalog = catalog_for(str(warehouse))
    schema = pa.schema([pa.field("dt", pa.string(), nullable=False),
                        pa.field("k", pa.int32(), nullable=False), ("v", pa.string())])
    catalog.create_database("db", True)
    catalog.create_table(TABLE, Schema.from_pyarrow_schema(
        schema, partition_keys=["dt"], primary_keys=["dt", "k"],
        options={"bucket": "1", "deletion-vectors.enabled": "true"}), False)
    table = catalog.get_table(TABLE)
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(pa.Table.from_pylist(
        [{"dt": "a", "k": 1, "v": "x"}, {"dt": "b", "k": 2, "v": "y"}], schema=schema))
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()
    return warehouse


@pytest.fixture
def warehouse(built: Path, tmp_path: Path) -> Iterator[Path]:
    copy = tmp_path / "wh"
    shutil.copytree(built, copy)
    before = tree(copy)
    yield copy
    assert tree(copy) == before, "a refused command changed the warehouse"


# One interpreter runs the commands one after the other, as ``python -m paimond.cli`` would
# (an exception escaping main() prints its traceback and exits 1): importing paimond takes
# seconds, once per test file rather than once per command.
_DRIVER = """
import contextlib, io, json, os, sys, traceback
from paimond.cli.main import main
results = []
for argv, env in json.loads(sys.stdin.read()):
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
    for name in env:
        os.environ.pop(name, None)
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


def _paimond(cases: list[tuple[list[str], dict[str, str]]]) -> list[tuple[int, str, str]]:
    """(exit code, stdout, stderr) of each (argv, environment) in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _DRIVER], input=json.dumps(cases), text=True,
                          capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return [(int(code), out, err) for code, out, err in json.loads(done.stdout)]


def test_every_command_refuses_a_bad_table_name_with_exit_2_and_no_traceback(
        warehouse: Path) -> None:
    """What a user sees. Commands without --table (run, run-once) refuse the unknown
    option, also with 2."""
    results = _paimond([(_argv(c, str(warehouse), "nodot"), {}) for c in COMMANDS])
    for command, (code, out, err) in zip(COMMANDS, results, strict=True):
        assert "Traceback" not in out + err, f"{command}: {err}"
        assert code == EXIT_USAGE, f"{command}: exit {code}: {err}"
        if command in _with("--table"):
            assert "a table name is DB.TABLE, got 'nodot'" in err, f"{command}: {err}"


@pytest.mark.parametrize("command", _with("--table"))
def test_an_unknown_table_is_named_with_its_warehouse(
        command: str, warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if command in ("trigger", "pause", "resume"):  # the daemon answers 404: test_readiness.py,
        pytest.skip(f"{command} names a daemon, not a warehouse")  # test_daemon_policy.py
    assert main(_argv(command, str(warehouse), "db.x")) == EXIT_USAGE, command
    assert f"table db.x not found in {warehouse}" in capsys.readouterr().err


@pytest.mark.parametrize("command", sorted(c for c in COMMANDS if any(
    not a.option_strings and a.dest == "warehouse" for a in COMMANDS[c]._actions)))
def test_a_warehouse_that_does_not_exist_is_a_usage_error(
        command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-warehouse"
    table = TABLE if "--table" in _options(command) else None
    assert main(_argv(command, str(missing), table)) == EXIT_USAGE
    assert f"{missing} does not exist" in capsys.readouterr().err
    assert not missing.exists(), "nothing was created"


@pytest.mark.parametrize("command", _with("--storage-option"))
def test_a_malformed_storage_option_is_a_usage_error(
        command: str, warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(command, str(warehouse), TABLE if "--table" in _options(command) else None)
    assert main([*argv, "--storage-option", "novalue"]) == EXIT_USAGE
    assert "--storage-option: wants KEY=VALUE, got 'novalue'" in capsys.readouterr().err


@pytest.mark.parametrize("command", _with("--partition"))
def test_a_partition_option_that_is_not_a_partition_key_is_refused_alike(
        command: str, warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(command, str(warehouse), TABLE)
    assert main([*argv, "--partition", "nokey=1", "--dry-run"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"nokey is not a partition key of {TABLE} (partition keys: ['dt'])" in err
    # a real partition key passes the check (the dry run changes nothing); compact-chain-table
    # then refuses the table, which is not a chain table
    code = main([*argv, "--partition", "dt=a", "--dry-run"])
    if command == "compact-chain-table":
        assert code == 1 and "is not a chain table" in capsys.readouterr().err  # refused
    else:
        assert code == 0


def test_status_of_an_empty_warehouse_is_fine(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["status", str(tmp_path / "empty")]) == 0
    assert "no Paimon tables under" in capsys.readouterr().out


def test_trigger_with_a_missing_token_file(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "token"
    assert main(["trigger", NO_SUCH_URL, "--table", TABLE, "--token-file", str(missing)]
                ) == EXIT_CONFIG
    assert f"cannot read --token-file {missing}: No such file or directory" in (
        capsys.readouterr().err)


def _restart_prevent_exit_status() -> set[int]:
    found = re.findall(r"^RestartPreventExitStatus=(.+)$", SERVICE_FILE.read_text(), re.M)
    assert found, "the unit names the exit status systemd must not restart on"
    return {int(code) for line in found for code in line.split()}


def test_config_errors_exit_with_the_status_systemd_does_not_restart(tmp_path: Path) -> None:
    """A taken port and a missing warehouse: the daemon exits at once with the code the unit
    lists in RestartPreventExitStatus (not a restart loop), a message, no traceback."""
    assert EXIT_CONFIG == EXIT_USAGE
    assert _restart_prevent_exit_status() == {EXIT_CONFIG}
    (tmp_path / "wh").mkdir()
    missing = str(tmp_path / "no")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"PAIMOND_HTTP_HOST": "127.0.0.1", "PAIMOND_HTTP_PORT": str(port)}
        cases = [(["run"], {**env, "PAIMOND_WAREHOUSE": str(tmp_path / "wh")}),
                 (["run"], {**env, "PAIMOND_WAREHOUSE": missing}),
                 (["run-once"], {"PAIMOND_WAREHOUSE": missing})]
        results = _paimond(cases)
    messages = [f"http.port: cannot listen on 127.0.0.1:{port}: Address already in use",
                f"warehouse: {missing} does not exist", f"warehouse: {missing} does not exist"]
    for message, (code, out, err) in zip(messages, results, strict=True):
        assert code == EXIT_CONFIG, err
        assert message in err and "Traceback" not in out + err


@pytest.mark.parametrize("command, flag, value", [
    ("compact", "--parallelism", "-2"), ("compact", "--parallelism", "0"),
    ("rewrite-index", "--parallelism", "0"), ("expire-snapshots", "--max-deletes", "-1"),
    ("expire-snapshots", "--max-deletes", "0"), ("expire-snapshots", "--retain-max", "0"),
    ("expire-partitions", "--max-num", "0")])
def test_numbers_out_of_range_are_refused_naming_the_flag(
        command: str, flag: str, value: str, warehouse: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--parallelism -2` ran, `--max-deletes -1` turned expiry into a silent no-op."""
    with pytest.raises(SystemExit) as exit_info:
        main([command, str(warehouse), "--table", TABLE, f"{flag}={value}"])
    assert exit_info.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"argument {flag}: must be an integer >= 1, got '{value}'" in err
    assert "Traceback" not in err


def test_settings_errors_speak_of_flags(tmp_path: Path, warehouse: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """`remove-orphans --older-than 1min` said `config older_than: ... (use force)`."""
    assert main(["remove-orphans", str(warehouse), "--table", TABLE, "--older-than",
                 "1 min", "--dry-run"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "paimond: --older-than: a window of" in err and "(use --force)" in err, err
    assert "config " not in err
