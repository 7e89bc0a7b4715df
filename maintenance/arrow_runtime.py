"""What a process that only runs compaction sets up before its first task.

pyarrow imports pandas the first time it converts numpy data or an array to numpy, only to
learn whether pandas objects may be about (its Python shim, and again in C++ for pandas' null
sentinels): about 0.9 s of CPU and 60 MB in every process that runs a task, the command's own
and each pool worker's, though paimond never hands pyarrow a pandas object nor asks for one.
:func:`skip_pandas` makes ``import pandas`` fail in this process from then on, so pyarrow
takes its no-pandas paths (the same results for Arrow and numpy data). Only processes that
run nothing but paimond call it: the local pool's worker processes, and the ``paimond
compact`` command's own process (``main()`` without arguments, the local executor); never a
caller's process (``main(argv)``, ``CompactJob`` in a program, the daemon). A process that
already imported pandas is left as it is.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class _NoPandas:
    """A meta path finder that answers ``import pandas`` with ImportError."""

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is kept out of a paimond compaction process",
                                      name=name)
        return None


def skip_pandas() -> bool:
    """Keep pandas out of this process (see the module doc); False when it is already in."""
    if "pandas" in sys.modules:
        return False
    if not any(isinstance(finder, _NoPandas) for finder in sys.meta_path):
        sys.meta_path.insert(0, _NoPandas())
    return True
