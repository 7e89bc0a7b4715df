"""The `make run` demo: a local warehouse, an ingestion job that keeps committing small
batches, and the paimond daemon maintaining it. Watch level-0 files pile up and get
compacted, and the metrics move.

Usage: python examples/demo.py WAREHOUSE_DIR [SECONDS]   (SECONDS=0 runs until Ctrl-C)
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
from demo_warehouse import ORDERS, build, sessions_batch
from pypaimon import CatalogFactory

PORT = int(os.environ.get("DEMO_PORT", "9181"))


def _ingest(warehouse: Path, stop: threading.Event) -> None:
    """Small upserts to demo.orders every second, as a streaming ingestion would."""
    catalog = CatalogFactory.create({"warehouse": str(warehouse)})
    table, sessions = catalog.get_table("demo.orders"), catalog.get_table("demo.sessions")
    rng = random.Random()
    while not stop.wait(1.0):
        _commit(sessions, sessions_batch(rng, 20))
        ids = rng.sample(range(1, 200), 10)
        batch = pa.table({
            "order_id": ids, "dt": [f"2026-11-{20 + i % 3:02d}" for i in ids],
            "customer": [f"customer-{i % 17}" for i in ids],
            "amount": [None] * len(ids), "status": ["updated"] * len(ids),
            "row_kind": ["+U"] * len(ids)}, schema=ORDERS)
        _commit(table, batch)


def _commit(table: object, batch: pa.Table) -> None:
    builder = table.new_batch_write_builder()  # type: ignore[attr-defined]
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(batch)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def _gauges(url: str) -> str:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    shown = {"demo.orders": ("level0_files", "max_sorted_runs", "snapshots"),
             "demo.sessions": ("level0_files", "dv_cardinality")}
    parts = []
    for table, names in shown.items():
        for line in text.splitlines():
            for name in names:
                if line.startswith(f'paimond_table_{name}{{table="{table}"}}'):
                    parts.append(f"{table.split('.')[1]}.{name}={line.rsplit(' ', 1)[1]}")
    done = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("paimond_jobs_finished_total") and 'outcome="success"' in line)
    return "  ".join(parts) + f"  jobs_ok={done:.0f}"


def _step(text: str) -> None:
    print(f"==> {text}", flush=True)


def _stopped(daemon: subprocess.Popen[bytes]) -> bool:
    """True, after saying so, when the daemon has exited (its port taken, a bad config...)."""
    code = daemon.poll()
    if code is None:
        return False
    print(f"the paimond daemon exited with code {code} (see its log above); is port {PORT} "
          "taken? set DEMO_PORT to another port", file=sys.stderr, flush=True)
    return True


def main() -> int:
    warehouse = Path(sys.argv[1]).resolve()
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    _step(f"writing the demo warehouse {warehouse} with pypaimon (every file in level 0)")
    build(warehouse)
    with tempfile.TemporaryDirectory(prefix="paimond-demo-") as folder:  # gone afterwards
        code = _serve(warehouse, Path(folder) / "paimond.toml", seconds)
    print(f"demo finished; inspect with: paimond status {warehouse}")
    return code


def _serve(warehouse: Path, config: Path, seconds: float) -> int:
    """The daemon on the demo warehouse (its job lines shown) beside an ingestion job that
    commits every second, for ``seconds`` (0: until Ctrl-C); 0 if the daemon stopped cleanly."""
    config.write_text(f'[[warehouses]]\nuri = "{warehouse}"\n'
                      "[jobs.compact]\ninterval_s = 5\n[jobs.expire]\ninterval_s = 10\n"
                      f"[daemon]\ncheck_interval_s = 2\n[http]\nport = {PORT}\n"
                      f'[lookup_cache]\ndirectory = "{config.parent / "lookup-cache"}"\n'
                      '[log]\nformat = "console"\nlevel = "info"\n')
    _step("starting the paimond daemon and an ingestion job (write-only) committing every second")
    daemon = subprocess.Popen([sys.executable, "-m", "paimond.cli", "run", "--config",
                               str(config)])
    url = f"http://127.0.0.1:{PORT}"
    print(f"paimond daemon started on {warehouse}; metrics at {url}/metrics", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    writer = threading.Thread(target=_ingest, args=(warehouse, stop), daemon=True)
    writer.start()
    started = time.monotonic()
    while not stop.wait(5.0):
        if _stopped(daemon):
            stop.set()
            break
        try:
            print(f"[{time.monotonic() - started:5.0f} s] {_gauges(url)}", flush=True)
        except OSError:
            print("waiting for the daemon's metrics ...", flush=True)
        if seconds and time.monotonic() - started >= seconds:
            stop.set()
    writer.join(10)
    if daemon.poll() is not None:
        return 1
    _step("stopping the daemon (SIGTERM: a running commit finishes first)")
    daemon.send_signal(signal.SIGTERM)
    return 0 if daemon.wait(60) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
