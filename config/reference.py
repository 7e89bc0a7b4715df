"""The config file's reference, rendered from the declarations the loader parses with: the
non-job keys (``settings.KEYS``), ``[[policies]]`` (``policy.POLICY_KEYS``), each job's
``[jobs.<name>]`` section (the job types handed in, as to ``load_settings``) and the
environment variables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from paimond.config.declare import Declared, Key, type_name
from paimond.config.jobs import DaemonJob, daemon_fields
from paimond.config.policy import POLICY_KEYS
from paimond.config.settings import ENVIRONMENT, KEYS

_HEADER = "| key | type | default | allowed | description |\n|---|---|---|---|---|"


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return f"{value:g}" if isinstance(value, float) else str(value)


def _allowed(declared: Declared) -> str:
    if declared.choices:
        return ", ".join(declared.choices)
    low, high = declared.minimum, declared.maximum
    if declared.duration:
        return f">= {int(low or 0) // 1000} s" if low else "a duration ('30 min', '1 h', '2 d')"
    parts = [f">= {low:g}" if low is not None else "", f"<= {high:g}" if high is not None else ""]
    return ", ".join(p for p in parts if p)


def _row(key: str, kind: str, default: Any, declared: Declared) -> str:
    return (f"| `{key}` | {kind} | {_default(default)} | {_allowed(declared)} | "
            f"{declared.doc} |")


def _key_rows(keys: Sequence[Key]) -> list[str]:
    return [_row(k.leaf, type_name(k.kind, k.declared), k.default, k.declared) for k in keys]


def _section_title(section: str) -> str:
    if section == "":
        return "Top level"
    return "`[[warehouses]]`" if section == "warehouses" else f"`[{section}]`"


def render_markdown(jobs: Sequence[DaemonJob]) -> str:
    """Every section and key of the config file, and the environment variables; ``jobs``: the
    registry's routine jobs (their ``[jobs.<name>]`` sections)."""
    out = ["# paimond configuration reference", "",
           "The daemon reads a TOML (or YAML) file; environment variables override it. An "
           "unknown section, job or key is refused, naming it.", ""]
    sections: dict[str, list[Key]] = {}
    for key in KEYS:
        sections.setdefault(key.section, []).append(key)
    for section, keys in sections.items():
        out += [f"## {_section_title(section)}", "", _HEADER, *_key_rows(keys), ""]
    for job in jobs:
        rows = [_row(f.key, type_name(f.kind, f.declared, f.optional and f.daemon_default is None),
                     f.daemon_default, f.declared) for f in daemon_fields(job)]
        out += [f"## `[jobs.{job.name}]`", "", _HEADER, *rows, ""]
    out += ["## `[[policies]]`", "",
            "The first policy whose `tables` match a table applies to it; its "
            "`[policies.jobs.<name>]` sections take the keys of `[jobs.<name>]`.", "",
            _HEADER, *_key_rows(POLICY_KEYS), ""]
    out += ["## Environment", "",
            "`PAIMOND_<SECTION>_<KEY>` sets a key of a section (`PAIMOND_HTTP_PORT=9200`), "
            "`PAIMOND_JOBS_<JOB>_<KEY>` a key of a job's section "
            "(`PAIMOND_JOBS_COMPACT_INTERVAL_S=30`); policies are set in the file only.", "",
            "| variable | description |", "|---|---|",
            *(f"| `{name}` | {doc} |" for name, doc in ENVIRONMENT), ""]
    return "\n".join(out)
