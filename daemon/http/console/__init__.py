"""The web console: static files shipped inside the package (``index.html``, ``console.js``,
``console.css``; no build step, no Node.js), served by the daemon at ``/`` and
``/console/<file>``. The page polls the versioned JSON endpoints (``/api/v1/tables``,
``/api/v1/table?name=db.table``) and posts the control endpoints with the operator's token."""

from __future__ import annotations

import functools
from importlib import resources

CONTENT_TYPES = {"index.html": "text/html; charset=utf-8",
                 "console.js": "text/javascript; charset=utf-8",
                 "console.css": "text/css; charset=utf-8"}


@functools.cache
def asset(name: str) -> tuple[bytes, str] | None:
    """(bytes, content type) of one console file; None for any other name."""
    content_type = CONTENT_TYPES.get(name)
    if content_type is None:
        return None
    return resources.files(__name__).joinpath(name).read_bytes(), content_type
