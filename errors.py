"""The error hierarchy of paimond, one subclass per remedy.

Every error names what it is about (a file, a key, a table) in its message, built in
``__init__`` from fields so callers never format messages themselves.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Protocol

ErrorKind = Literal["retry", "backoff", "data", "config", "unsupported", "internal"]
"""The remedy an error calls for: re-plan now (retry), try again later (backoff), fix or
restore a file (data), fix the settings or the table's options (config), leave the job to
Paimon until the table's options change (unsupported), or a bug (internal).
Bounded, so it can label a metric."""


class PaimondError(Exception):
    """Root of every error paimond raises on purpose.

    Errors cross process boundaries (a pool worker's error reaches the parent pickled). The
    default pickling calls ``cls(*args)`` with the message alone, which fails for a subclass
    whose ``__init__`` takes fields; here an error is rebuilt from its message and fields.
    """

    kind: ClassVar[ErrorKind] = "internal"

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild_error, (type(self), self.args, self.__dict__)


def _rebuild_error(cls: type[PaimondError], args: tuple[Any, ...],
                   fields: dict[str, Any]) -> PaimondError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(fields)
    return error


class CodecError(PaimondError):
    """Bytes that do not decode. Codecs raise it without a path; ``table/`` re-raises it as
    :class:`CorruptFileError` naming the file."""

    kind: ClassVar[ErrorKind] = "data"

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class CorruptFileError(PaimondError):
    """A file exists but cannot be parsed. Never retried; nothing is deleted because of it."""

    kind: ClassVar[ErrorKind] = "data"

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class MissingFileError(PaimondError):
    """A file that metadata references does not exist."""

    kind: ClassVar[ErrorKind] = "data"

    def __init__(self, path: str, referenced_by: str | None = None) -> None:
        self.path = path
        self.referenced_by = referenced_by
        where = f" (referenced by {referenced_by})" if referenced_by else ""
        super().__init__(f"{path}: file not found{where}")


class UnsupportedError(PaimondError):
    """Valid Paimon metadata that paimond does not handle (yet)."""

    kind: ClassVar[ErrorKind] = "config"

    def __init__(self, what: str, path: str | None = None) -> None:
        self.what = what
        self.path = path
        super().__init__(f"{path}: {what}" if path else what)


class RefusedError(UnsupportedError):
    """A job refuses a table at plan time, before writing anything: the table sets options
    that change what the job must produce and paimond does not implement them
    (``paimond.table.options.semantic``). ``fingerprint`` names the schema and options the
    refusal was decided on; the same job is not due again until they change."""

    kind: ClassVar[ErrorKind] = "unsupported"

    def __init__(self, job: str, reason: str, path: str | None = None,
                 fingerprint: str = "") -> None:
        self.job = job
        self.reason = reason
        self.fingerprint = fingerprint
        super().__init__(f"{job} refused: {reason}", path)


class CommitConflictError(PaimondError):
    """The table moved under us in a way that invalidates the plan: re-plan. ``requirement``
    names the commit's precondition that failed (``paimond.table.commit.requirements``),
    ``expected`` what it required, ``found`` what the latest snapshot holds instead."""

    kind: ClassVar[ErrorKind] = "retry"

    def __init__(self, table: str, requirement: str, expected: str, found: str) -> None:
        self.table = table
        self.requirement = requirement
        self.expected = expected
        self.found = found
        super().__init__(f"{table}: {requirement} failed: expected {expected}, found {found}")


class CommitCancelledError(PaimondError):
    """The daemon is stopping: a commit not yet published is abandoned (table/commit/gate.py)."""

    kind: ClassVar[ErrorKind] = "retry"

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(f"{what}: not committed, the daemon is stopping")


class StorageUnavailableError(PaimondError):
    """Storage could not be reached: back off and retry later."""

    kind: ClassVar[ErrorKind] = "backoff"

    def __init__(self, uri: str, reason: str) -> None:
        self.uri = uri
        self.reason = reason
        super().__init__(f"{uri}: storage unavailable: {reason}")


class ConfigError(PaimondError):
    """Bad configuration; the process exits with code 2."""

    kind: ClassVar[ErrorKind] = "config"

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"config {key}: {reason}")


class WorkerError(PaimondError):
    """An unexpected error in a worker process, carried back as text: the original exception
    (from a third-party library, say) may not survive pickling."""

    kind: ClassVar[ErrorKind] = "internal"

    def __init__(self, task: str, error_type: str, reason: str, traceback_text: str = "") -> None:
        self.task = task
        self.error_type = error_type
        self.reason = reason
        self.traceback_text = traceback_text
        super().__init__(f"{task}: {error_type}: {reason}")


class BucketsFailedError(PaimondError):
    """Some buckets of a job failed (named in ``detail``); the others were committed."""

    kind: ClassVar[ErrorKind] = "data"

    def __init__(self, table: str, job: str, detail: str) -> None:
        self.table = table
        self.job = job
        self.detail = detail
        super().__init__(f"{table}: {job} failed in part:\n{detail}")


class MaintenanceFailedError(PaimondError):
    """Some bucket could not be compacted; the other buckets and jobs did their work
    (``paimond.spark.maintain``)."""

    def __init__(self, summary: DescribedSummary) -> None:
        self.summary = summary
        super().__init__(f"maintenance of {summary.table_name} failed:\n{summary.describe()}")


class DescribedSummary(Protocol):
    """What :class:`MaintenanceFailedError` names: the table and a description of the run."""

    @property
    def table_name(self) -> str: ...

    def describe(self) -> str: ...


class DaemonUnreachableError(PaimondError):
    """The daemon could not be asked (down, or a 5xx answer): try again, or go ahead."""

    kind: ClassVar[ErrorKind] = "backoff"

    def __init__(self, url: str, reason: str) -> None:
        self.url, self.reason = url, reason
        super().__init__(f"{url}: {reason}")


class AdmissionTimeoutError(PaimondError):
    """The table was still held back when the wait ran out; ``last``: the daemon's last
    answer (``paimond.spark.admission.TableAdmission``), if any."""

    def __init__(self, table: str, reason: str, timeout_s: float,
                 last: object | None = None) -> None:
        self.table, self.reason, self.timeout_s, self.last = table, reason, timeout_s, last
        super().__init__(f"{table} still not admitted after {timeout_s} s: {reason}")


class JobCancelledError(Exception):
    """The daemon is stopping: abandon this job before it commits."""


class UnreadableTableError(Exception):
    """The table's status could not be read: no answer either way."""


class TypeParseError(ValueError):
    """A type string or JSON type that is not part of Paimon's grammar."""

    def __init__(self, text: object, reason: str) -> None:
        super().__init__(f"cannot parse data type {text!r}: {reason}")


class PartitionStatsMismatchError(Exception):
    """A manifest holds an entry outside the partition range its statistics state: windows
    cannot be trusted for this snapshot (plan it in one window)."""


class NullPartitionValueError(ValueError):
    """Java's NullPointerException: the timestamp text needs a null partition value."""

    def __init__(self, key: str) -> None:
        super().__init__(f"partition value of {key} is null")


class CacheFileError(Exception):
    """A lookup cache file that must not be trusted (the reason says why)."""


def kind_of(error: BaseException) -> ErrorKind:
    """The remedy for any exception: a paimond error's ``kind``, anything else a bug."""
    return error.kind if isinstance(error, PaimondError) else "internal"
