"""`make run`'s demo (examples/demo.py) shows the recommended setup: write-only writers,
the daemon's job lines in its log, nothing left behind but the demo warehouse."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pypaimon  # noqa: F401 - the demo's writer: an oracle-free run leaves this test out

ROOT = Path(__file__).parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_demo_runs_write_only_writers_and_shows_the_jobs(tmp_path: Path) -> None:
    temp_root = Path(tempfile.gettempdir())
    before = set(temp_root.glob("paimond-demo-*"))
    warehouse = tmp_path / "demo-warehouse"
    env = {**os.environ, "DEMO_PORT": str(_free_port()), "PYTHONPATH": str(ROOT.parent)}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py"), str(warehouse),
                           "12"], capture_output=True, text=True, timeout=300, env=env,
                          check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "job_finished" in output, "the daemon's job lines are shown"
    assert set(temp_root.glob("paimond-demo-*")) == before, "its config folder is removed"
    status = subprocess.run([sys.executable, "-m", "paimond.cli", "status", str(warehouse)],
                            capture_output=True, text=True, timeout=120, env=env, check=False)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "themselves too" not in status.stdout, status.stdout
    assert status.stdout.count("writers: write-only (paimond is the table's maintainer)") == 3, \
        status.stdout
