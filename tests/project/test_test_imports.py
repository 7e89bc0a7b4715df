"""The suite's own shape: helpers shared between test modules live in tests/support/ (imported as
``support.<module>``, tests/ being on sys.path through pytest's ``pythonpath`` setting); a test
module imports no other test module and no test code changes ``sys.path``. A subprocess's
script (a string) may take a path as its argument; that is not this process's sys.path."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
TEST_MODULES = {path.stem for path in TESTS.rglob("test_*.py")} | {"conftest"}
PATH_MUTATORS = {"insert", "append", "extend", "remove", "pop", "clear", "__setitem__",
                 "__delitem__", "__iadd__"}


def _python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
            for alias in node.names:  # from package import module
                yield node.lineno, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            yield node.lineno, "." * node.level + (node.module or "")


def _is_sys_path(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def _sys_path_changes(tree: ast.AST) -> Iterator[int]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if _is_sys_path(node.func.value) and node.func.attr in PATH_MUTATORS:
                yield node.lineno
            if node.func.attr == "addsitedir":
                yield node.lineno
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            if _is_sys_path(target) or (isinstance(target, ast.Subscript)
                                        and _is_sys_path(target.value)):
                yield node.lineno


def test_no_test_module_imports_another() -> None:
    found = []
    for path in _python_files():
        for line, module in _imported(ast.parse(path.read_text(), str(path))):
            if module.startswith(".") or any(part in TEST_MODULES for part in module.split(".")):
                found.append(f"{path.relative_to(TESTS)}:{line} imports {module}")
    assert not found, "test modules import test modules (move the helper to tests/support/):\n" \
        + "\n".join(found)


def test_no_test_code_changes_sys_path() -> None:
    found = [f"{path.relative_to(TESTS)}:{line}" for path in _python_files()
             for line in _sys_path_changes(ast.parse(path.read_text(), str(path)))]
    assert not found, "sys.path changed in tests (use support.<module>):\n" + "\n".join(found)


def test_the_checks_see_what_they_forbid() -> None:
    imports = ast.parse("import test_tags\nfrom test_tags import Writer\n"
                        "from support import test_x\nfrom . import helpers\n")
    assert [m for _, m in _imported(imports) if m.startswith(".")
            or any(p in TEST_MODULES | {"test_x"} for p in m.split("."))] == [
        "test_tags", "test_tags", "test_tags.Writer", "support.test_x", "."]
    changes = ast.parse("import sys, site\nsys.path.insert(0, 'x')\nsys.path[:0] = ['x']\n"
                        "sys.path = []\nsys.path += ['x']\nsite.addsitedir('x')\n"
                        "print(sys.path)\nfound = list(sys.path)\n")
    assert sorted(set(_sys_path_changes(changes))) == [2, 3, 4, 5, 6]
