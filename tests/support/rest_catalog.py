"""Apache Paimon's own REST catalog server on 127.0.0.1: ``RESTCatalogServer`` from the test jar
Paimon publishes on Maven Central with paimon-core 2.0.0 (the server Paimon's REST catalog
tests run against), started by ``tests/support/java/RestCatalogServe.java`` over a
filesystem warehouse. One server per test (``rest_catalog``); it needs a JDK and Maven, skips
without them and fails under ``CI=true``.

Java's writers reach it as Paimon's ``RESTCatalog`` does (``java_maintainer.catalog_write``
with :meth:`RestServer.options` plus the token), paimond with the same options and the token
in ``PAIMOND_REST_TOKEN``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.java_paimon import JavaUnavailable, classpath_text, rest_server_classpath, stop_serving

SOURCE = Path(__file__).parent / "java" / "RestCatalogServe.java"
TOKEN = "paimond-rest-token"
PREFIX = "paimond"
WAREHOUSE_NAME = "rest_warehouse"
JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dlog4j2.statusLoggerLevel=OFF")


@dataclass(frozen=True, slots=True)
class RestServer:
    url: str
    warehouse: Path  # where the server keeps its tables

    def options(self) -> dict[str, str]:
        """Paimon's catalog options for this server (the token apart)."""
        return {"metastore": "rest", "uri": self.url.rstrip("/"), "warehouse": WAREHOUSE_NAME,
                "token.provider": "bear"}

    def java_options(self) -> dict[str, str]:
        """What a Java client passes: the options with the token."""
        return {**self.options(), "token": TOKEN}


@pytest.fixture(scope="session")
def rest_server_classes(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    try:
        jars = rest_server_classpath()
    except JavaUnavailable as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Paimon's REST catalog server unavailable under CI: {e}")
        pytest.skip(f"Paimon's REST catalog server: {e}")
    classes = tmp_path_factory.mktemp("rest_server") / "classes"
    result = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", classpath_text(jars),
                             str(SOURCE)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"javac failed:\n{result.stdout}\n{result.stderr}")
    return jars, classes


@pytest.fixture
def rest_catalog(rest_server_classes: tuple[list[Path], Path],
                 tmp_path: Path) -> Iterator[RestServer]:
    """A REST catalog server of its own for one test, its warehouse under ``tmp_path``."""
    jars, classes = rest_server_classes
    warehouse = tmp_path / "rest-warehouse"
    warehouse.mkdir()
    log = tempfile.TemporaryFile(dir=tmp_path)
    process = subprocess.Popen(
        ["java", *JVM_FLAGS, "-cp", classpath_text(jars, classes), "RestCatalogServe",
         str(warehouse), TOKEN, PREFIX, WAREHOUSE_NAME],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("#URL "):
            process.wait(timeout=30)
            log.seek(0)
            raise RuntimeError(f"the REST catalog server did not start ({process.returncode}):"
                               f"\n{line}{log.read().decode('utf-8', 'replace')[-4000:]}")
        yield RestServer(line[len("#URL "):].strip(), warehouse)
    finally:
        stop_serving(process)
        log.close()
