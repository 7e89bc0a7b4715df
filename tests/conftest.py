"""Shared fixtures. Service fixtures live in their own modules and are re-exported here."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
from s3_endpoint import s3_endpoint, s3_storage  # noqa: F401
from spark_session import spark  # noqa: F401


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def oracle_warehouse(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list]:
    """Every pypaimon-written test table (tests/pypaimon_tables.py), written once per session.

    Read-only: tests that change a table copy it first.
    """
    from pypaimon_tables import build_all

    warehouse = str(tmp_path_factory.mktemp("oracle") / "wh")
    return warehouse, build_all(warehouse)
