"""Shared fixtures. Service fixtures live in their own modules and are re-exported here."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Test helpers (support/) and the test modules whose cases other folders reuse (format/ for
# the row codecs, maintenance/ for the deletion-vector scenarios) import by bare name.
TESTS = Path(__file__).resolve().parent
SHARED_FOLDERS = (TESTS / "support", TESTS / "format", TESTS / "maintenance")
sys.path[:0] = [str(folder) for folder in SHARED_FOLDERS]

from java_maintainer import java_maintainer  # noqa: E402, F401
from java_reader import java_reader, java_readers  # noqa: E402, F401
from s3_endpoint import s3_endpoint, s3_storage  # noqa: E402, F401
from spark_session import spark  # noqa: E402, F401

settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def oracle_warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list]:
    """Every pypaimon-written test table (tests/support/pypaimon_tables.py), written once per session.

    Read-only: tests that change a table copy it first.
    """
    from pypaimon_tables import build_all

    warehouse = str(tmp_path_factory.mktemp("oracle") / "wh")
    return warehouse, build_all(warehouse)


# --- the newest-dependencies run -----------------------------------------------------------
# CI installs paimond with the newest releases its ranges allow and no oracle (pypaimon pins
# pyarrow < 20), and sets PAIMOND_TESTS_WITHOUT_ORACLES=1: only the test files that need no
# oracle are collected. A file needs one when it, or a helper module of tests/ it imports,
# imports an oracle or asks for a fixture that builds tables with one.
ORACLE_MODULES = {"pypaimon", "pypaimon_rust", "pyspark", "pyfory", "kubernetes_validate",
                  "paimon_python_java", "java_reader", "java_paimon",
                  "java_maintainer"}
ORACLE_FIXTURES = {"oracle_warehouse", "spark", "java_reader", "java_readers",
                   "java_maintainer"}


def _needs_oracle(path: Path, seen: set[Path]) -> bool:
    import ast

    if path in seen or not path.exists():
        return False
    seen.add(path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if {a.arg for a in node.args.args} & ORACLE_FIXTURES:
                return True
        for module in modules:
            top = module.split(".")[0]
            if top in ORACLE_MODULES or any(_needs_oracle(folder / f"{top}.py", seen)
                                            for folder in (path.parent, *SHARED_FOLDERS)):
                return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if os.environ.get("PAIMOND_TESTS_WITHOUT_ORACLES") != "1":
        return None
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return True if _needs_oracle(collection_path, set()) else None


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    """A test that configures logging (``paimond run`` in-process) leaves no configuration
    behind for the next."""
    yield
    import structlog

    structlog.reset_defaults()
