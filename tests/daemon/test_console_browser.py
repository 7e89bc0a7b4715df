"""The web console in a real browser (headless Chromium): ``paimond run`` maintains a
warehouse with a healthy table and a paused table whose sorted runs reached the stop trigger.
The overview lists both with the right state, health and reason; the paused table's page shows
its bucket at the stop trigger; resuming and triggering it from the page runs the compaction,
and the page updates itself when the job ends, its history charts showing the runs' rise and
fall and the job's duration. A phone-width window needs no horizontal scroll.
Screenshots of both pages go to the test's directory (and to ``$PAIMOND_CONSOLE_SCREENSHOTS``,
which is how the ones under docs/images/ were made)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
from support.daemon_process import start_daemon
from support.pypaimon_tables import catalog_for, commit_arrow

TOKEN = "console-token"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
DEADLINE_S = 120


def _create(warehouse: str, name: str) -> None:
    from pypaimon import Schema

    catalog = catalog_for(warehouse)
    catalog.create_database("db", True)
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "write-only": "true", "num-sorted-run.compaction-trigger": "3",
        "num-sorted-run.stop-trigger": "5"}), False)


def _commit(warehouse: str, name: str, start: int) -> None:
    ids = list(range(start, start + 10))
    commit_arrow(warehouse, name, pa.table({"id": ids, "v": [f"v{i}" for i in ids]},
                                           schema=SCHEMA))


def _tables(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/api/v1/tables", timeout=10) as response:
        return dict(json.loads(response.read())["tables"])


def _post(url: str, action: str, table: str) -> None:
    request = urllib.request.Request(f"{url}/{action}", data=json.dumps({"table": table}).encode(),
                                     headers={"Authorization": f"Bearer {TOKEN}"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200


def _until(what: str, check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        try:
            found = check()
        except Exception:  # noqa: BLE001 - the page or the daemon not there yet: look again
            found = None
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _screenshot(browser: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    browser.save_screenshot(str(path))
    assert path.stat().st_size > 10_000  # a rendered page, not a blank one
    if os.environ.get("PAIMOND_CONSOLE_SCREENSHOTS"):
        shutil.copy(path, Path(os.environ["PAIMOND_CONSOLE_SCREENSHOTS"]) / name)


def test_the_console_shows_the_warehouse_and_runs_a_job(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    warehouse = str(tmp_path / "wh")
    for name in ("db.healthy", "db.backlog"):
        _create(warehouse, name)
        for i in range(2):
            _commit(warehouse, name, i * 5)
    config = tmp_path / "paimond.toml"
    config.write_text(f"""
[[warehouses]]
uri = "{warehouse}"
[jobs.compact]
interval_s = 1
[daemon]
check_interval_s = 0.3
discovery_interval_s = 1
[http]
port = 0
[shutdown]
grace_s = 20
[log]
format = "json"
""")
    process, url = start_daemon(config, {**os.environ, "PAIMOND_TRIGGER_TOKEN": TOKEN})
    try:
        _until("both tables compacted", lambda: {
            name for name, t in _tables(url).items()
            if t["jobs"]["compact"]["outcome"] == "success"} == {"db.healthy", "db.backlog"})
        _post(url, "pause", "db.backlog")
        for i in range(2, 8):  # six more level-0 runs: past the stop trigger
            _commit(warehouse, "db.backlog", i * 5)
        _until("the backlog's figures", lambda: _tables(url)["db.backlog"]["figures"].get(
            "max_sorted_runs", 0) >= 5)

        browser.get(f"{url}/")
        rows = _until("the overview's rows", lambda: {
            row.get_attribute("data-table"): row
            for row in browser.find_elements(By.CSS_SELECTOR, "#tables tbody tr")} or None)
        assert set(rows) == {"db.healthy", "db.backlog"}
        backlog, healthy = rows["db.backlog"], rows["db.healthy"]
        assert backlog.find_element(By.CLASS_NAME, "state").text == "paused"
        assert "stop trigger" in backlog.find_element(By.CLASS_NAME, "why").text
        assert "poor" in backlog.find_element(By.CLASS_NAME, "health").get_attribute("class")
        assert healthy.find_element(By.CLASS_NAME, "state").text == "idle"
        assert healthy.find_element(By.CLASS_NAME, "why").text == "healthy"
        # worst first: the default order is by health
        order = [r.get_attribute("data-table")
                 for r in browser.find_elements(By.CSS_SELECTOR, "#tables tbody tr")]
        assert order == ["db.backlog", "db.healthy"]
        _screenshot(browser, tmp_path, "console-overview.png")

        backlog.find_element(By.LINK_TEXT, "db.backlog").click()
        cell = _until("the bucket's runs", lambda: browser.find_element(
            By.CSS_SELECTOR, '#buckets tr[data-bucket="/0"] .cell'))
        assert "stop" in cell.get_attribute("class") and int(cell.text) >= 5
        assert browser.find_element(By.ID, "table-title").text == "db.backlog"
        browser.set_window_size(1280, 1500)  # the whole page, buckets included
        _screenshot(browser, tmp_path, "console-table.png")
        browser.set_window_size(1280, 900)

        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, 'button[data-action="resume"]').click()
        _until("the resume's answer", lambda: "resume: accepted" in browser.find_element(
            By.ID, "action-result").text)
        browser.find_element(By.CSS_SELECTOR, 'button[data-action="trigger"]').click()
        # the page polls: the compacted bucket and the job's outcome appear by themselves
        _until("the compacted bucket", lambda: browser.find_element(
            By.CSS_SELECTOR, '#buckets tr[data-bucket="/0"] .cell').text == "1")
        outcome = browser.find_element(By.CSS_SELECTOR, '#jobs tr[data-job="compact"] .outcome')
        assert outcome.text == "success"
        # the history charts: the sorted runs went up with the writes and down with the job
        runs_chart = _until("the sorted runs' history", lambda: browser.find_element(
            By.CSS_SELECTOR, '[data-chart="max_sorted_runs"]').text.endswith(": 1") and
            browser.find_element(By.CSS_SELECTOR, '[data-chart="max_sorted_runs"]'))
        heights = [float(p.split(",")[1]) for p in runs_chart.find_element(
            By.TAG_NAME, "polyline").get_attribute("points").split()]
        assert len(heights) >= 3 and min(heights) < heights[-1]  # a peak above the last
        jobs_chart = browser.find_element(By.CSS_SELECTOR, '[data-chart="job_seconds"]')
        assert jobs_chart.find_elements(By.TAG_NAME, "circle")
        # the run just made, newest first among the recent runs, with what it read and wrote
        compaction = _until("the compaction among the recent runs", lambda: [
            row.text for row in browser.find_elements(By.CSS_SELECTOR, '#runs tr[data-run-job]')
            if row.get_attribute("data-run-job") == "compact" and "80 rows" in row.text])
        assert "success" in compaction[0]  # it read the 80 rows of the eight runs
        settings = browser.find_element(By.ID, "settings").text
        assert "num-sorted-run.stop-trigger = 5 (table option)" in settings
        assert "compact.full = false ([jobs.compact] or its default)" in settings
        assert "branches: none" in browser.find_element(By.ID, "references").text

        browser.set_window_size(375, 800)  # a phone
        browser.get(f"{url}/")
        _until("the overview at phone width", lambda: browser.find_elements(
            By.CSS_SELECTOR, "#tables tbody tr"))
        assert browser.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except Exception:
            process.kill()
            raise
