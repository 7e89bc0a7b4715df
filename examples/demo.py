"""The `make run` demo: a local warehouse, an ingestion job that keeps committing small
batches, and the paimond daemon maintaining it. Watch level-0 files pile up and get
compacted, and the metrics move.

Usage: python examples/demo.py WAREHOUSE_DIR [SECONDS]   (SECONDS=0 runs until Ctrl-C)
"""

from __future__ import annotations

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


def main() -> None:
    warehouse = Path(sys.argv[1]).resolve()
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0
    build(warehouse)
    config = Path(tempfile.mkdtemp(prefix="paimond-demo-")) / "paimond.toml"
    config.write_text(f'[[warehouses]]\nuri = "{warehouse}"\n'
                      "[jobs.compact]\ninterval_s = 5\n[jobs.expire]\ninterval_s = 10\n"
                      "[daemon]\ncheck_interval_s = 2\n[http]\nport = 9181\n"
                      f'[lookup_cache]\ndirectory = "{config.parent / "lookup-cache"}"\n'
                      '[log]\nformat = "console"\nlevel = "warning"\n')
    daemon = subprocess.Popen([sys.executable, "-m", "paimond.daemon.cli", "run", "--config",
                               str(config)])
    url = "http://127.0.0.1:9181"
    print(f"paimond daemon started on {warehouse}; metrics at {url}/metrics", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    writer = threading.Thread(target=_ingest, args=(warehouse, stop), daemon=True)
    writer.start()
    started = time.monotonic()
    while not stop.wait(5.0):
        try:
            print(f"[{time.monotonic() - started:5.0f} s] {_gauges(url)}", flush=True)
        except OSError:
            print("waiting for the daemon's metrics ...", flush=True)
        if seconds and time.monotonic() - started >= seconds:
            stop.set()
    writer.join(10)
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(60)
    print(f"demo finished; inspect with: paimond status {warehouse}")


if __name__ == "__main__":
    main()
