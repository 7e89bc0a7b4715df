"""Package discovery for the root-is-the-package layout (metadata lives in pyproject.toml).

Every folder with an ``__init__.py`` under the repository root, except the ones that are not
shipped, becomes ``paimond.<folder>``; the root's own modules are ``paimond.<module>``, this
file excepted.
"""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

NOT_SHIPPED = ["tests", "tests.*", "bench", "bench.*", "examples", "examples.*", "deploy", "deploy.*",
               "build", "build.*", "dist", "dist.*"]


class BuildPackage(build_py):  # type: ignore[misc]  # setuptools ships no types
    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        modules = super().find_package_modules(package, package_dir)
        return [m for m in modules if (m[0], m[1]) != ("paimond", "setup")]


setup(packages=["paimond"] + [f"paimond.{name}" for name in find_packages(".", exclude=NOT_SHIPPED)],
      cmdclass={"build_py": BuildPackage})
