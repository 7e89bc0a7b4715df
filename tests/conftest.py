"""Shared fixtures. Service fixtures live in tests/support/ and are re-exported here.

tests/ is on sys.path through pytest's ``pythonpath`` setting (pyproject.toml), so the helpers
import as ``support.<module>``; test modules import nothing from one another.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from support.browser import browser  # noqa: F401
from support.hive_metastore import hive_java_maintainer, hive_metastore  # noqa: F401
from support.java_maintainer import java_maintainer  # noqa: F401
from support.java_reader import java_reader, java_readers, java_readers_here  # noqa: F401
from support.postgres import postgres  # noqa: F401
from support.rest_catalog import rest_catalog, rest_server_classes  # noqa: F401
from support.s3_endpoint import s3_endpoint, s3_storage  # noqa: F401
from support.spark_session import spark  # noqa: F401

TESTS = Path(__file__).resolve().parent
SUPPORT = TESTS / "support"

settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile("fast", max_examples=15, deadline=None)  # make test-fast
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def oracle_warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list]:
    """Every pypaimon-written test table (tests/support/pypaimon_tables.py), written once per session.

    Read-only: tests that change a table copy it first.
    """
    from support.pypaimon_tables import build_all

    warehouse = str(tmp_path_factory.mktemp("oracle") / "wh")
    return warehouse, build_all(warehouse)


# --- the newest-dependencies run -----------------------------------------------------------
# CI installs paimond with the newest releases its ranges allow and no oracle (pypaimon pins
# pyarrow < 20), and sets PAIMOND_TESTS_WITHOUT_ORACLES=1: only the test files that need no
# oracle are collected. A file needs one when it, or a helper module of tests/ it imports,
# imports an oracle or asks for a fixture that builds tables with one.
ORACLE_MODULES = {"pypaimon", "pypaimon_rust", "pyspark", "pyfory", "kubernetes_validate",
                  "paimon_python_java", "support.java_reader", "support.java_paimon",
                  "support.java_maintainer"}
ORACLE_FIXTURES = {"oracle_warehouse", "spark", "java_reader", "java_readers",
                   "java_maintainer", "hive_metastore", "hive_java_maintainer"}


def _needs_oracle(path: Path, seen: set[Path]) -> bool:
    import ast

    if path in seen or not path.exists():
        return False
    seen.add(path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "support":
            modules = [f"support.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if {a.arg for a in node.args.args} & ORACLE_FIXTURES:
                return True
        for module in modules:
            parts = module.split(".")
            if parts[0] in ORACLE_MODULES or ".".join(parts[:2]) in ORACLE_MODULES:
                return True
            if parts[0] == "support" and len(parts) > 1 and _needs_oracle(
                    SUPPORT / f"{parts[1]}.py", seen):
                return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if os.environ.get("PAIMOND_TESTS_WITHOUT_ORACLES") != "1":
        return None
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return True if _needs_oracle(collection_path, set()) else None


# --- markers from what a test uses, and the workers that run it ----------------------------
# make test runs the suite on one pytest-xdist worker per core with --dist loadgroup; make
# test-fast leaves out `-m "jvm or spark or crash_campaign or slow"`. A test asking for a Java
# oracle (directly or through another fixture) is `jvm`; one asking for Spark, or under
# tests/spark/, is `spark`. Tests that start Java by hand carry `jvm` themselves.
JVM_FIXTURES = {"java_reader", "java_readers", "java_maintainer", "java_readers_here",
                "rest_catalog", "hive_metastore", "hive_java_maintainer"}
SPARK_FIXTURES = {"spark"}
# Tests that share one worker (`--dist loadgroup`), by the folder or module they live in: the
# Spark tests (every one is under tests/spark/: Spark's local cluster, a master, two workers and
# two executor JVMs, runs once per session, on one worker), and a module whose last test reports
# on the others (module state), in file order; the Java differential's report is `jvm` with the
# comparisons it reports on.
GROUP_FOLDERS = {"spark": "spark"}
GROUP_MODULES = {"interop/test_java_differential.py": "java_differential"}
JVM_MODULES = {"interop/test_java_differential.py"}
# `slow`: the tests that took 2.5 CPU seconds or more each (worker and reaped subprocesses) in
# a -m "not jvm and not spark and not crash_campaign" run; all parameters of a listed test.
SLOW = (
    "daemon/test_storage_outage.py::test_two_daemons_through_storage_outages_never_overlap[s3]",
    "daemon/test_daemon_e2e.py::test_daemon_maintains_an_s3_warehouse",
    "daemon/test_daemon_e2e.py::test_daemon_maintains_a_local_warehouse",
    "daemon/test_console_browser.py::test_the_console_shows_the_warehouse_and_runs_a_job",
    "daemon/test_daemon_e2e.py::test_every_line_is_json_and_a_stop_ends_with_daemon_stopped",
    "daemon/test_watch_windows.py::test_synthetic_table_with_regeneration_needs",
    "daemon/test_readiness.py::test_an_s3_bucket_that_does_not_exist_is_not_ready",
    "lsm/test_lsm_model.py::TestTableLsm",
    "lsm/test_row_merge.py::test_listagg_collect_merge_map_match_the_model",
    "cli/test_compact_cli.py::test_a_crash_before_the_snapshot_leaves_the_table_unchanged",
    "cli/test_compact_cli.py::test_workers_that_start_fresh_compact_alike",
    "maintenance/test_append_compact.py::"
    "test_a_killed_run_leaves_the_table_readable_and_the_rerun_cleans",
    "maintenance/test_changelog_expire.py::test_crash_at_every_point_then_rerun",
    "maintenance/test_compact_oracle.py::test_compaction_keeps_what_pypaimon_reads",
    "maintenance/test_manifests_oracle.py::"
    "test_merge_manifests_commits_one_compact_snapshot_that_reads_the_same",
    "maintenance/test_manifests_oracle.py::test_a_compaction_commit_merges_from_thirty_manifests_on",
    "maintenance/test_expire_property.py::test_expiration_keeps_exactly_what_is_referenced",
    "maintenance/test_expire_oracle.py::"
    "test_a_crash_after_any_deletion_keeps_kept_snapshots_readable_and_a_rerun_converges",
    "maintenance/test_memory_budget.py::test_the_estimate_follows_batch_size_and_runs",
    "format/test_manifest_sizes.py::test_each_prefix_size_equals_the_prefix_encoded_whole",
    "format/test_row_file.py::test_arrow_batches_round_trip_to_the_same_bytes",
    "interop/test_pypaimon_tables.py::test_build_all_writes_every_table_with_one_snapshot_per_commit",
    "project/test_demo.py::test_the_demo_runs_write_only_writers_and_shows_the_jobs",
    "table/test_s3_scan.py::test_warehouse_uploaded_to_s3_scans_like_local",
    "table/test_s3_scan.py::test_table_written_to_s3_by_pypaimon",
    "maintenance/test_retention_property.py::test_no_step_deletes_what_is_referenced",
    "maintenance/test_orphans.py::test_on_s3_with_an_injected_clock",
    "maintenance/test_memory_budget.py::test_peak_rss_of_a_compaction_stays_within_a_small_budget",
)


def _is_slow(item: pytest.Item) -> bool:
    test_id = item.path.relative_to(TESTS).as_posix() + "::" + "::".join(
        item.nodeid.split("::")[1:])
    return any(test_id == slow or test_id.startswith((slow + "[", slow + "::")) for slow in SLOW)


def _worker_group(relative: str) -> str | None:
    """The group of the test file at ``relative`` (to tests/, POSIX), or None."""
    return GROUP_MODULES.get(relative) or GROUP_FOLDERS.get(relative.split("/", 1)[0])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    spark_folder = TESTS / "spark"
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if used & JVM_FIXTURES or item.path.relative_to(TESTS).as_posix() in JVM_MODULES:
            item.add_marker(pytest.mark.jvm)
        if used & SPARK_FIXTURES or spark_folder in item.path.parents:
            if spark_folder not in item.path.parents:
                raise pytest.UsageError(f"{item.nodeid} asks for Spark: it belongs in "
                                        "tests/spark/, whose tests share one worker")
            item.add_marker(pytest.mark.spark)
        if _is_slow(item):
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the order the workers take
        items[:] = sorted(items, key=_start_rank)


def _start_rank(item: pytest.Item) -> int:
    """Long tests first: --dist loadgroup hands out its groups largest first (the Spark group
    goes to one worker), then single tests in collection order to whichever worker is free; a
    long test late in that order would keep one worker busy after the other ran out. Grouped
    tests keep their file order."""
    if _worker_group(item.path.relative_to(TESTS).as_posix()) is not None:
        return 2
    if item.get_closest_marker("crash_campaign") is not None:
        return 0
    return 1 if item.get_closest_marker("slow") is not None else 2


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadgroup`` with the groups above, read from each test's path. pytest-xdist's
    own grouping (an ``xdist_group`` mark, suffixed to the node id on the workers) has no effect
    with pytest 9.2, whose node id is no longer the attribute xdist 3.8 rewrites: the Spark
    tests went to both workers, each starting a local cluster."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class PathGroups(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = (config.rootpath / nodeid.split("::", 1)[0]).resolve()
            if TESTS in path.parents:
                group = _worker_group(path.relative_to(TESTS).as_posix())
                if group is not None:
                    return group
            return super()._split_scope(nodeid)

    return PathGroups(config, log)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    """A test that configures logging (``paimond run`` in-process) leaves no configuration
    behind for the next."""
    yield
    import structlog

    structlog.reset_defaults()
