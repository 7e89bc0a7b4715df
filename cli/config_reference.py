"""The config file's reference for the daemon's jobs: ``render_markdown()`` (the docs'
generator calls it; ``python -m paimond.cli.config_reference`` prints it)."""

from __future__ import annotations

from paimond.config import reference
from paimond.maintenance.jobs import ROUTINE


def render_markdown() -> str:
    """The reference of every key the daemon reads, its ``[jobs.<name>]`` sections those of
    the registry's routine jobs."""
    return reference.render_markdown(ROUTINE)


if __name__ == "__main__":
    print(render_markdown())
