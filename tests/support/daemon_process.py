"""``paimond run`` as a real process: started from a config file, its metrics URL read from
its log; its further log lines collected while it runs."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path


def start_daemon(config: Path, env: dict[str, str], lines: list[str] | None = None
                 ) -> tuple[subprocess.Popen[str], str]:
    """The daemon, started; its base URL (``http://host:port``). Its log lines go on into
    ``lines``."""
    process = subprocess.Popen([sys.executable, "-m", "paimond.cli", "run", "--config",
                                str(config)], env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    kept = lines if lines is not None else []
    started = time.monotonic()
    while time.monotonic() - started < 60:
        line = process.stderr.readline()
        kept.append(line)
        match = re.search(r"serving (http://\S+)/metrics|\"metrics_url\": \"(http://\S+)/metrics",
                          line)
        if match:
            threading.Thread(target=kept.extend, args=(process.stderr,), daemon=True).start()
            return process, match.group(1) or match.group(2)
        if process.poll() is not None:
            break
    process.kill()
    raise AssertionError("the daemon did not start:\n" + "".join(kept))
