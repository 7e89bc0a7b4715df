"""The documentation's generated references equal what docs/generate.py makes from the code
now: a metric or a flag changed without `make docs` fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PAGES = generator().pages()


@pytest.mark.parametrize("page", sorted(PAGES))
def test_the_committed_reference_is_what_the_generator_writes(page: str) -> None:
    committed = DOCS / page
    assert committed.exists(), f"docs/{page} is missing: run `python docs/generate.py`"
    assert committed.read_text() == PAGES[page], f"docs/{page} is stale: run `python docs/generate.py`"


def test_the_references_cover_every_metric_and_command() -> None:
    from prometheus_client import CollectorRegistry

    from paimond.cli.main import build_parser
    from paimond.daemon.metrics import Metrics

    registry = CollectorRegistry()
    Metrics(registry)
    metrics = PAGES["reference/metrics.md"]
    for family in registry.collect():
        name = family.name + "_total" if family.type == "counter" else family.name
        assert f"| `{name}` |" in metrics, name
    cli = PAGES["reference/cli.md"]
    usage = build_parser().format_usage()
    commands = usage[usage.index("{") + 1:usage.index("}")].split(",")
    assert len(commands) > 10
    for command in commands:
        assert f"\n## {command}\n" in cli, command
    assert "`--storage-option`" in cli and "`--lookup-cache-size`" in cli


def test_the_check_mode_names_a_stale_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    module = generator()
    monkeypatch.setattr(module, "DOCS", tmp_path)
    assert module.main(["--check"]) == 1
    assert "docs/reference/metrics.md differs" in capsys.readouterr().err
    assert module.main([]) == 0
    assert module.main(["--check"]) == 0
