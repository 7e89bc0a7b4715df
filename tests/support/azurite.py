"""A real Azure Blob endpoint on loopback: Azurite (Microsoft's emulator, from the npm registry),
started by the first test that asks for it and stopped at the end of the session.

Azurite is installed with npm into ``~/.cache/paimond-tests/azurite`` (or
``$PAIMOND_TEST_CACHE/azurite``) the first time, under a file lock (pytest-xdist workers share
it). Without npm the tests skip, except under ``CI=true``, where they fail. Nothing here
contacts anything but 127.0.0.1 (and the npm registry for the install).
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

AZURITE = "azurite@3.37.0"
ACCOUNT = "devstoreaccount1"  # Azurite's well-known development account and key
KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
       "KBHBeksoGMGw==")
_START_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Azurite:
    port: int

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
                f"BlobEndpoint=http://127.0.0.1:{self.port}/{ACCOUNT};")

    @property
    def storage_options(self) -> dict[str, str]:
        return {"connection_string": self.connection_string}


def _unavailable(message: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"Azurite unavailable under CI: {message}")
    pytest.skip(f"Azurite unavailable: {message}")


def _installed() -> Path:
    cache = Path(os.environ.get("PAIMOND_TEST_CACHE", Path.home() / ".cache" / "paimond-tests"))
    home = cache / "azurite"
    binary = home / "node_modules" / ".bin" / "azurite-blob"
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            try:
                subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error",
                                "--prefix", str(home), AZURITE], check=True, timeout=600,
                               capture_output=True, text=True)
            except FileNotFoundError:
                _unavailable("npm is not installed")
            except subprocess.CalledProcessError as error:
                _unavailable(f"npm install {AZURITE} failed: {error.stderr.strip()[-400:]}")
    return binary


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    binary = _installed()
    port = _free_port()
    data = tmp_path_factory.mktemp("azurite")
    log = open(data / "azurite.log", "w")  # noqa: SIM115 (closed when the process is)
    process = subprocess.Popen(
        [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location",
         str(data), "--silent", "--skipApiVersionCheck", "--loose"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                _unavailable(f"azurite-blob exited ({process.returncode}): "
                             f"{(data / 'azurite.log').read_text()[-400:]}")
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                _unavailable(f"azurite-blob did not listen on port {port} in time")
            time.sleep(0.1)
        yield Azurite(port)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
