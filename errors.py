"""The error hierarchy of paimond, one subclass per remedy.

Every error names what it is about (a file, a key, a table) in its message, built in
``__init__`` from fields so callers never format messages themselves.
"""

from __future__ import annotations


class PaimondError(Exception):
    """Root of every error paimond raises on purpose."""


class CodecError(PaimondError):
    """Bytes that do not decode. Codecs raise it without a path; ``table/`` re-raises it as
    :class:`CorruptFileError` naming the file."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class CorruptFileError(PaimondError):
    """A file exists but cannot be parsed. Never retried; nothing is deleted because of it."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class MissingFileError(PaimondError):
    """A file that metadata references does not exist."""

    def __init__(self, path: str, referenced_by: str | None = None) -> None:
        self.path = path
        self.referenced_by = referenced_by
        where = f" (referenced by {referenced_by})" if referenced_by else ""
        super().__init__(f"{path}: file not found{where}")


class UnsupportedError(PaimondError):
    """Valid Paimon metadata that paimond does not handle (yet)."""

    def __init__(self, what: str, path: str | None = None) -> None:
        self.what = what
        self.path = path
        super().__init__(f"{path}: {what}" if path else what)


class CommitConflictError(PaimondError):
    """The table moved under us in a way that invalidates the plan: re-plan."""


class StorageUnavailableError(PaimondError):
    """Storage could not be reached: back off and retry later."""

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        self.reason = reason
        super().__init__(f"{uri}: storage unavailable: {reason}")


class ConfigError(PaimondError):
    """Bad configuration; the process exits with code 2."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"config {key}: {reason}")
