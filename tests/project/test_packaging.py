"""The package as a user installs it: the wheel carries every module, and every third-party
module that runtime code imports is a declared dependency (a plain `pip install` would miss it
otherwise; CI also installs the wheel alone and runs it)."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
NOT_SHIPPED = {"tests", "bench", "examples", "deploy", "build", "dist"}
# Modules of an extra, imported lazily behind a clear message.
EXTRAS = {"pyspark": "spark", "azure": "azure", "pg8000": "jdbc"}  # module -> its extra
# a namespace module whose distribution's name differs, for an environment without the extra
NOT_INSTALLED_PROVIDERS = {"azure": "azure-core"}


def runtime_modules() -> list[Path]:
    """Every module under the package's folders (a folder is a package by its __init__.py)."""
    modules = [p for p in ROOT.glob("*.py") if p.name != "setup.py"]
    for init in ROOT.glob("*/__init__.py"):
        if init.parent.name not in NOT_SHIPPED:
            modules.extend(p for p in init.parent.rglob("*.py") if "__pycache__" not in p.parts)
    return modules


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    out = tmp_path_factory.mktemp("wheel")
    # sdist first, then the wheel from it in a clean directory (a stale build/ is not read)
    subprocess.run([uv, "build", "--no-build-logs", "-o", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = out.glob("paimond-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_the_wheel_carries_every_module_and_nothing_else(wheel_names: set[str]) -> None:
    expected = {"paimond/" + p.relative_to(ROOT).as_posix() for p in runtime_modules()}
    shipped = {name for name in wheel_names if name.endswith(".py")}
    assert len(expected) > 100
    assert shipped == expected


def test_the_wheel_carries_the_web_consoles_files(wheel_names: set[str]) -> None:
    console = {n for n in wheel_names if n.startswith("paimond/daemon/http/console/")
               and not n.endswith(".py")}
    assert console == {f"paimond/daemon/http/console/{name}"
                       for name in ("index.html", "console.js", "console.css")}


def test_the_wheel_declares_the_console_script(wheel_names: set[str]) -> None:
    (entry_points,) = [n for n in wheel_names if n.endswith(".dist-info/entry_points.txt")]
    assert entry_points.startswith("paimond-")


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> files importing it, for every absolute import outside paimond."""
    stdlib = set(sys.stdlib_module_names) | {"tomllib"}
    found: dict[str, set[str]] = {}
    for path in runtime_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib and top != "paimond":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s;<>=!~\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_every_imported_module_is_a_declared_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_requirement_name(r) for r in project["dependencies"]}
    extras = {name: {_requirement_name(r) for r in reqs}
              for name, reqs in project["optional-dependencies"].items()}
    distributions = importlib.metadata.packages_distributions()
    imported = _third_party_imports()
    assert {"numpy", "pyarrow", "fastavro", "cramjam", "botocore", "aiohttp", "yaml"} <= set(imported)
    for module, files in sorted(imported.items()):
        providers = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if module not in distributions and module in NOT_INSTALLED_PROVIDERS:
            providers = {NOT_INSTALLED_PROVIDERS[module]}  # an extra absent from this env
        if module == "tomli":  # Python 3.10's tomllib
            providers = {"tomli"}
        wanted = extras[EXTRAS[module]] if module in EXTRAS else declared
        assert providers & wanted, f"{module} (imported by {sorted(files)}) is not declared"


def test_python_310_gets_tomli_and_older_pythons_the_zstd_backport() -> None:
    requirements = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(r.startswith("tomli") and "python_version < '3.11'" in r for r in requirements)
    assert any(r.startswith("backports.zstd") and "python_version < '3.14'" in r
               for r in requirements)
