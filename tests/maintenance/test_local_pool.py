"""The local worker pool: a worker process that dies breaks the pool; every bucket still ends
as a result or a named failure, including those not yet submitted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any, cast

from paimond.maintenance.execution import run_in_local_pool

POOL_BREAK_TIMEOUT_S = 120.0
UNBROKEN = -1  # what a task returns when the pool never broke: fails the test


def _dies_on_zero(task: int) -> int:
    """Task 0 kills its worker; the others run until the broken pool terminates their workers,
    so every task is still unfinished when the death is seen. The wait only bounds a failure."""
    if task == 0:
        os._exit(3)
    threading.Event().wait(POOL_BREAK_TIMEOUT_S)
    return UNBROKEN


def test_a_dead_worker_fails_every_bucket_it_left_unfinished() -> None:
    tasks = list(range(8))
    results, failures = run_in_local_pool(cast(Any, tasks), cast(Any, _dies_on_zero), 2,
                                          use_processes=True, progress=None)
    failed = [cast(int, f.task) for f in failures]
    assert sorted(cast(list[int], results) + failed) == tasks
    assert 0 in failed and len(failed) > 1  # the pool broke with tasks still to submit
    assert all("BrokenProcessPool" in f.error for f in failures)


FORKED_PROBE = """
import sys
from paimond.maintenance.execution import run_in_local_pool

def had(task):
    return "paimond.table.options.file_index" in sys.modules, "pandas" in sys.modules

assert "paimond.table.options.file_index" not in sys.modules
results, failures = run_in_local_pool([1, 2], had, 2, use_processes=True, progress=None)
assert not failures and results == [(True, False)] * 2, (results, failures)
assert "pandas" not in sys.modules
print("inherited")
"""


def test_workers_fork_after_the_parent_imported_what_a_task_imports_late() -> None:
    done = subprocess.run([sys.executable, "-c", FORKED_PROBE], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0 and "inherited" in done.stdout, done.stdout + done.stderr


def test_what_tasks_import_late_is_imported_before_the_workers_fork() -> None:
    """Workers fork from a process that may have threads (the daemon's); an import a task
    makes late (a format, the index codecs, the lookup cache) is made in the parent first."""
    late = ["pyarrow.orc", "paimond.format.row_file.file", "paimond.format.file_index",
            "paimond.table.options.file_index", "paimond.lsm.lookup.lookup_cache"]
    probe = ("import json, sys\n"
             "from paimond.maintenance import execution\n"
             f"late = {late!r}\n"
             "before = [name for name in late if name in sys.modules]\n"
             "execution._before_fork()\n"
             "print(json.dumps([before, [name for name in late if name in sys.modules]]))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    before, after = json.loads(done.stdout)
    assert before == [] and after == late
