"""The layer rules of DESIGN.md hold (import-linter contracts in pyproject.toml), and the
contracts do catch an upward import: one is planted in a copy of the package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_SHIPPED = {"tests", "bench", "examples", "deploy", "build", "dist"}


def lint_imports(pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:  # sys.path wins over an editable install's finder
        env["PYTHONPATH"] = str(pythonpath)
    command = [str(Path(sys.executable).parent / "lint-imports"), "--config",
               str(ROOT / "pyproject.toml"), "--no-cache"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300,
                          cwd=pythonpath or ROOT)


def test_the_package_keeps_every_contract() -> None:
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "BROKEN" not in result.stdout and "0 broken" in result.stdout


def _copy_of_the_package(into: Path) -> Path:
    package = into / "paimond"
    package.mkdir()
    for path in ROOT.glob("*.py"):
        if path.name != "setup.py":
            shutil.copy(path, package)
    for init in ROOT.glob("*/__init__.py"):
        if init.parent.name not in NOT_SHIPPED:
            shutil.copytree(init.parent, package / init.parent.name,
                            ignore=shutil.ignore_patterns("__pycache__"))
    return package


def test_an_upward_import_breaks_the_layers(tmp_path: Path) -> None:
    package = _copy_of_the_package(tmp_path)
    types = package / "format" / "types" / "data_types.py"
    types.write_text(types.read_text() + "\nfrom paimond.daemon import metrics  # upward\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "paimond.format.types.data_types -> paimond.daemon.metrics" in result.stdout


def test_pyspark_outside_spark_breaks_a_contract(tmp_path: Path) -> None:
    package = _copy_of_the_package(tmp_path)
    compact = package / "maintenance" / "compact" / "job.py"
    compact.write_text(compact.read_text() + "\nimport pyspark  # only spark/ may\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "Only spark/ imports pyspark BROKEN" in result.stdout
