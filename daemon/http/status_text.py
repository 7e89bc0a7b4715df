"""``/status`` as text (``paimond status --daemon URL``) and as an HTML page (``/status`` for a
browser), from its JSON alone: the standard library only, so the command line renders it
without loading the daemon."""

from __future__ import annotations

import datetime
import html
from collections.abc import Mapping
from typing import Any


def _when(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "-"
    moment = datetime.datetime.fromtimestamp(value, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def render_text(tables: Mapping[str, Any]) -> str:
    """The plain-text view ``paimond status --daemon URL`` prints."""
    if not tables:
        return "the daemon maintains no table (yet)"
    blocks = []
    for name, entry in sorted(tables.items()):
        policy = entry.get("policy") or {}
        head = f"{name}  {entry.get('state')}; policy {policy.get('name') or '[jobs]'}"
        lines = [head]
        if entry.get("error"):
            lines.append(f"  last error: {entry['error']}")
        for key in ("concurrency", "full_compaction_window", "max_compaction_debt_mb"):
            if policy.get(key) is not None:
                lines.append(f"  {key}: {policy[key]}")
        for key, source in sorted((policy.get("sources") or {}).items()):
            lines.append(f"  {key} from {source}")
        lines.append(f"  {'job':<18}{'last run':<25}{'outcome':<10}{'next due':<25}why")
        for job, row in (entry.get("jobs") or {}).items():
            lines.append(f"  {job:<18}{_when(row.get('last_run_at')):<25}"
                         f"{row.get('outcome') or '-':<10}{_when(row.get('next_due_at')):<25}"
                         f"{row.get('why', '')}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def render_html(tables: Mapping[str, Any]) -> str:
    """``/status`` for a browser: the text view per table, escaped."""
    body = "".join(f"<pre>{html.escape(render_text({name: entry}))}</pre>"
                   for name, entry in sorted(tables.items())) or "<p>no table yet</p>"
    return ("<!doctype html><html><head><meta charset='utf-8'><title>paimond status</title>"
            "</head><body><h1>paimond: tables</h1>" + body + "</body></html>")
