"""The growth line of bench/growth.py and bench/growth_jobs.py: the figure
at each size and the factor per doubling, against the goal of 2.0x (linear)."""

from __future__ import annotations

from collections.abc import Callable

GOAL = 2.0
NEAR = 2.3  # above the goal, yet far from quadratic (4.0)


def report_growth(name: str, sizes: list[int], measure: Callable[[int], float],
                  width: int = 28) -> list[float]:
    """Prints the line; returns the figure at each size."""
    figures = [measure(size) for size in sizes]
    growth = [later / max(earlier, 1e-9)
              for earlier, later in zip(figures, figures[1:], strict=False)]
    cells = "  ".join(f"{size}: {cpu:.3f} s" for size, cpu in zip(sizes, figures, strict=True))
    factors = ", ".join(f"{g:.2f}x" for g in growth)
    verdict = ("ok" if all(g <= GOAL for g in growth) else
               "near linear, above the goal" if all(g <= NEAR for g in growth) else
               "FASTER THAN LINEAR")
    print(f"{name:<{width}} {cells}   per doubling {factors} (goal <= {GOAL}x) {verdict}",
          flush=True)
    return figures
