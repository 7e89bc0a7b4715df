"""The Spark session of the Spark tests: started once by the first test that asks for it,
stopped at the end of the session. Local mode, ``local[2,3]``: two cores, and a failed task
runs up to 3 times as on a cluster (plain ``local[2]`` never retries). Loopback only, no UI,
Python workers on this interpreter. Skips when Spark cannot start here; fails under CI=true.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    try:
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # else the first interface's
        session = (SparkSession.builder.master("local[2,3]").appName("paimond-tests")
                   .config("spark.driver.host", "127.0.0.1")
                   .config("spark.driver.bindAddress", "127.0.0.1")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "4")
                   .getOrCreate())
    except Exception as error:  # no pyspark, no Java, no loopback: Spark is the missing service
        message = f"Spark cannot start locally: {type(error).__name__}: {error}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
