"""The job registry (``maintenance/jobs.py``) is lazy: importing it loads no job's code, and
each job's run imports its modules when it runs. These tests check that every registered name
is a job whose settings build, and that every import a run defers names something its module
defines (a renamed class would otherwise fail only when that job first runs)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import subprocess
import sys
import textwrap

import pytest

from paimond.errors import ConfigError
from paimond.maintenance import jobs
from paimond.maintenance.jobs import JOBS, ROUTINE_JOBS


def test_every_registered_name_is_a_job_with_its_settings() -> None:
    assert set(ROUTINE_JOBS) <= set(JOBS)
    assert len(JOBS) == 13
    for name, job in JOBS.items():
        assert job.name == name
        assert dataclasses.is_dataclass(job.settings_type)
        settings = job.settings(dry_run=True)
        assert isinstance(settings, job.settings_type)
        with pytest.raises(ConfigError, match="interval_s") as refused:
            job.settings(dry_run=True, interval_s=60)  # a key the job lacks is named
        assert refused.value.key == "interval_s"
        assert settings.dry_run is True  # type: ignore[attr-defined]
        assert list(inspect.signature(job.run).parameters) == ["table", "settings", "context"]


def _deferred_imports(function: object) -> list[tuple[str, str]]:
    """(module, name) of each ``from module import name`` inside a run function."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))  # type: ignore[arg-type]
    return [(node.module or "", alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) for alias in node.names]


def test_every_import_a_run_defers_resolves() -> None:
    runs = {job.run for job in JOBS.values()} | {jobs._sort_compact}
    imported: set[str] = set()
    for run in runs:
        deferred = _deferred_imports(run)
        assert deferred or run is jobs._sort_compact, run  # each job loads its own code
        for module, name in deferred:
            assert hasattr(importlib.import_module(module), name), f"{module}.{name} ({run})"
            imported.add(module)
    # the table preload() imports is exactly what the runs import; and every job module the
    # registry used to import at once is still reached by some run
    assert imported == set(jobs.JOB_MODULES)
    assert {"paimond.maintenance.compact.job", "paimond.maintenance.compact.sort_compact",
            "paimond.maintenance.compact.cluster_plan", "paimond.maintenance.expire.snapshots",
            "paimond.maintenance.expire.rounds", "paimond.maintenance.expire.consumers",
            "paimond.maintenance.expire.partitions", "paimond.maintenance.manifests",
            "paimond.maintenance.expire.orphans", "paimond.maintenance.regenerate.rewrite_index",
            "paimond.maintenance.regenerate.rebuild_dv", "paimond.maintenance.tags.job"} <= imported


def _loaded_by(code: str) -> set[str]:
    probe = f"import json, sys; {code}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)
    return set(json.loads(done.stdout))


def test_importing_the_registry_loads_no_job_code_and_preload_loads_all() -> None:
    loaded = _loaded_by("import paimond.maintenance.jobs")
    ours = {name for name in loaded if name.startswith("paimond.")}
    # the settings' declarations (config/declare.py) and what they check values with
    assert ours == {"paimond.clock", "paimond.maintenance", "paimond.maintenance.jobs",
                    "paimond.config", "paimond.config.declare", "paimond.config.values",
                    "paimond.durations", "paimond.errors"}
    assert not loaded & {"pyarrow", "numpy", "fsspec", "fastavro"}
    assert set(jobs.JOB_MODULES) <= _loaded_by(
        "from paimond.maintenance.jobs import preload; preload()")
