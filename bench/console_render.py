"""The web console's overview with many tables: how long it takes to render (filter, sort and
draw one page) with 5,000 tables, against the same page with 50 tables measured in the same
run, in headless Chromium (Debian's ``chromium`` and ``chromedriver``, as the browser test);
and the page's weight (its three files, raw and gzipped) and the JSON it polls.

A local HTTP server serves the console's files from the package and a synthetic
``/api/v1/tables?view=summary`` of N tables shaped as the daemon's (state, figures, refusals).
The page loads, then ``renderOverview()`` is timed in the page (``performance.now``)
``--repeat`` times, after a sort by another column and back. About 20 s.

    .venv/bin/python bench/console_render.py [--tables 5000] [--baseline 50] [--repeat 15]
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from paimond.daemon.http.console import CONTENT_TYPES, asset

JOBS = ("rebuild_dv", "compact", "rewrite_index", "expire_partitions", "tags",
        "expire_consumers", "expire", "merge_manifests", "remove_orphans")


def _tables(count: int) -> dict[str, Any]:
    out = {}
    for i in range(count):
        runs = i % 9
        out[f"db{i % 40}.t{i:05d}"] = {
            "state": ("idle", "running", "paused", "backing off")[i % 4],
            "quarantined": i % 97 == 0, "failures": i % 3, "error": None, "running": i % 4 == 1,
            "paused": None, "last_snapshot_id": i, "urgency": runs / 5,
            "jobs": {job: {"last_run_at": 1.8e9, "outcome": "success", "detail": "",
                           "next_due_at": 1.8e9 + 60, "why": "next run after interval_s=300"}
                     for job in JOBS},
            "figures": {"health": 100 - runs * 10, "level0_files": runs * 2,
                        "max_sorted_runs": runs, "compaction_trigger": 5, "stop_trigger": 8,
                        "compaction_debt_bytes": (runs > 5) * i * 1000, "snapshots": i % 50,
                        "postpone_rows": 0, "stale_index_files": 0,
                        "buckets_missing_vectors": 0}}
    return out


def _serve(payload: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            if self.path.startswith("/api/v1/tables"):
                body, kind = payload, "application/json"
            else:
                found = asset("index.html" if self.path in ("/", "/?refresh_ms=3600000")
                              else self.path.removeprefix("/console/"))
                if found is None:
                    self.send_error(404)
                    return
                body, kind = found
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _measure(browser: Any, count: int, repeat: int) -> tuple[float, float, int, int]:
    """(median render ms, load-to-rows ms, the overview's JSON bytes, the full entries' bytes)
    with ``count`` tables."""
    tables = _tables(count)
    summary = {name: {key: t[key] for key in ("state", "error", "quarantined", "failures",
                                              "running", "paused", "figures")} | {"refused": []}
               for name, t in tables.items()}
    full = json.dumps({"api_version": 1, "tables": tables}).encode()
    payload = json.dumps({"api_version": 1, "tables": summary}).encode()
    server = _serve(payload)
    url = f"http://127.0.0.1:{server.server_address[1]}/?refresh_ms=3600000"
    try:
        started = time.perf_counter()
        browser.get(url)
        shown = min(count, 100)
        while browser.execute_script(
                "return document.querySelectorAll('#tables tbody tr').length") < shown:
            time.sleep(0.005)
        loaded = (time.perf_counter() - started) * 1000
        timings = []
        for _ in range(repeat):
            timings.append(browser.execute_script("""
                document.querySelector('th button[data-sort="debt"]').click();
                document.querySelector('th button[data-sort="health"]').click();
                const t0 = performance.now(); renderOverview(); return performance.now() - t0;"""))
        return statistics.median(timings), loaded, len(payload), len(full)
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=5000)
    parser.add_argument("--baseline", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        raise SystemExit("needs chromium and chromedriver (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"):
        options.add_argument(argument)
    browser = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    try:
        _measure(browser, args.baseline, 3)  # warm the browser up
        base_ms, base_load, base_json, _ = _measure(browser, args.baseline, args.repeat)
        many_ms, many_load, many_json, many_full = _measure(browser, args.tables, args.repeat)
    finally:
        browser.quit()
    files = {name: asset(name) for name in CONTENT_TYPES}
    raw = sum(len(found[0]) for found in files.values() if found)
    zipped = sum(len(gzip.compress(found[0])) for found in files.values() if found)
    print(f"page weight: {raw / 1024:.1f} KiB in {len(files)} files "
          f"({zipped / 1024:.1f} KiB gzipped)")
    print(f"render (filter, sort, draw a page of 100): {args.baseline} tables {base_ms:.1f} ms, "
          f"{args.tables} tables {many_ms:.1f} ms ({many_ms / base_ms:.1f}x for "
          f"{args.tables / args.baseline:.0f}x the tables)")
    print(f"load to first rows: {args.baseline} tables {base_load:.0f} ms, {args.tables} tables "
          f"{many_load:.0f} ms")
    print(f"each poll, /api/v1/tables?view=summary: {base_json / 1024:.0f} KiB and "
          f"{many_json / 1024:.0f} KiB ({many_full / many_json:.1f}x less than the full "
          f"entries' {many_full / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
