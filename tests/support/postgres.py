"""A real PostgreSQL server on loopback (Debian's ``postgresql`` package: ``initdb`` and
``pg_ctl``), started in a temporary directory by the first test that asks for it and stopped
at the end of the session. PostgreSQL refuses to run as root: under root it runs as the
``postgres`` user the package creates. Without the package the tests skip, except under
``CI=true``, where they fail. It listens on 127.0.0.1 only."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PASSWORD = "paimond-test"


@dataclass(frozen=True, slots=True)
class Postgres:
    port: int
    user: str = "postgres"

    def uri(self, database: str = "postgres") -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{database}"


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(versions[-1]) if versions else None


def _unavailable(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"PostgreSQL unavailable under CI: {message}")
    pytest.skip(f"PostgreSQL unavailable: {message}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        _unavailable("initdb/pg_ctl not found (apt-get install postgresql)")
    assert initdb is not None and pg_ctl is not None
    # not under pytest's temporary root, which only root may enter
    home = Path(tempfile.mkdtemp(prefix="paimond-postgres-"))
    data, password_file = home / "data", home / "password"
    password_file.write_text(PASSWORD)
    prefix: list[str] = []
    if os.geteuid() == 0:  # the server refuses root
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no postgres user")
        for path in (home, password_file):
            os.chown(path, owner.pw_uid, owner.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run([*prefix, initdb, "-D", str(data), "-U", "postgres", "-A", "scram-sha-256",
                    f"--pwfile={password_file}"], check=True, capture_output=True, timeout=120)
    subprocess.run([*prefix, pg_ctl, "-D", str(data), "-l", str(home / "log"), "-w", "-o",
                    f"-c listen_addresses=127.0.0.1 -p {port} -k {home}", "start"],
                   check=True, capture_output=True, timeout=120)
    try:
        yield Postgres(port)
    finally:
        subprocess.run([*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
