"""Back-pressure for write-only writers: ``paimond.spark.admission`` asks a running daemon
whether a table can take another commit now (``GET /admission``), and can wait until it can.

A Paimon writer that compacts stalls itself at the stop trigger; a PySpark job writing with
``write-only=true`` (pypaimon in the executors, commits on the driver) does not, so it calls
this before each commit::

    import paimond.spark
    paimond.spark.admission("http://paimond:9181", "db.events", wait=True, timeout_s=600)
    commit()   # the table is below its stop trigger and within its compaction debt

The answer comes from the daemon (``daemon/tables/admission.py``); this module only speaks HTTP, so
it needs neither pyspark nor the daemon's code. The bearer token is the daemon's trigger token:
``token=``, else ``PAIMOND_TRIGGER_TOKEN``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from paimond.errors import AdmissionTimeoutError, ConfigError, DaemonUnreachableError

__all__ = ["TableAdmission", "admission"]


@dataclass(frozen=True, slots=True)
class TableAdmission:
    """The daemon's answer (``GET /admission``)."""

    table: str
    admitted: bool
    reason: str
    snapshot_id: int | None
    max_sorted_runs: int
    stop_trigger: int
    compaction_trigger: int
    compaction_debt_bytes: int
    max_compaction_debt_bytes: int | None
    waited_s: float = 0.0  # how long ``admission(wait=True)`` waited for it

    @classmethod
    def of(cls, reply: dict[str, Any], waited_s: float) -> TableAdmission:
        fields = {k: reply[k] for k in cls.__dataclass_fields__ if k != "waited_s"}
        return cls(**fields, waited_s=waited_s)


def _ask(url: str, table: str, token: str, timeout_s: float) -> dict[str, Any]:
    query = urllib.parse.urlencode({"table": table})
    request = urllib.request.Request(f"{url.rstrip('/')}/admission?{query}",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            reply: dict[str, Any] = json.loads(response.read())
            return reply
    except urllib.error.HTTPError as error:
        text = error.read().decode(errors="replace")
        if 400 <= error.code < 500:  # the request's fault: unknown table, token
            raise ConfigError("admission", f"{url} answered {error.code}: {text}") from None
        raise DaemonUnreachableError(url, f"answered {error.code}: {text}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise DaemonUnreachableError(url, f"cannot reach the daemon: {reason}") from None


def admission(url: str, table: str, *, token: str | None = None, wait: bool = False,
              timeout_s: float = 600.0, poll_s: float = 5.0, request_timeout_s: float = 30.0,
              sleep: Callable[[float], None] = time.sleep,
              monotonic: Callable[[], float] = time.monotonic) -> TableAdmission:
    """Whether ``table`` (``db.name``) may take a commit now, as the daemon at ``url`` sees it.

    With ``wait``, asks every ``poll_s`` until admitted and raises AdmissionTimeoutError after
    ``timeout_s``. Raises ConfigError without a token or for a 4xx answer (unknown table,
    wrong token) and DaemonUnreachableError when the daemon cannot be reached or answers 5xx
    (a writer may then decide to go ahead)."""
    token = token or os.environ.get("PAIMOND_TRIGGER_TOKEN")
    if not token:
        raise ConfigError("token", "the daemon's token is needed (token= or "
                                   "PAIMOND_TRIGGER_TOKEN)")
    started = monotonic()
    while True:
        waited = monotonic() - started
        answer = TableAdmission.of(_ask(url, table, token, request_timeout_s), waited)
        if answer.admitted or not wait:
            return answer
        if waited + poll_s > timeout_s:
            raise AdmissionTimeoutError(answer.table, answer.reason, timeout_s, answer)
        sleep(poll_s)
