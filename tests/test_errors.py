"""Errors cross process boundaries: each survives pickling with its fields, and a worker's
error fails its bucket, named, while the other buckets land (process pool included)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.pypaimon_tables import build_pk_deduplicate

import paimond
from paimond.clock import SYSTEM_CLOCK
from paimond.errors import CorruptFileError, PaimondError, WorkerError
from paimond.maintenance.compact.job import CompactJob
from paimond.table.catalog import open_table
from paimond.table.scan.snapshot_scan import data_file_path, scan_snapshot
from paimond.table.storage.interface import open_storage

OPTIONAL_IMPORTS = {"pyspark"}


def _every_error_class() -> list[type[PaimondError]]:
    for module in pkgutil.walk_packages(paimond.__path__, "paimond."):
        if module.name == "paimond.setup":  # the build script, not shipped
            continue
        try:
            importlib.import_module(module.name)
        except ImportError as error:  # modules of an extra that is not installed
            assert error.name in OPTIONAL_IMPORTS, error
    found: list[type[PaimondError]] = []
    pending: list[type[PaimondError]] = [PaimondError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def _sample_arguments(cls: type[PaimondError]) -> dict[str, Any]:
    if cls.__name__ == "MaintenanceFailedError":  # takes the summary of a maintenance run
        from paimond.spark import MaintenanceSummary
        return {"summary": MaintenanceSummary("db.t", durations_s={"compact": 1.5})}
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if all(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return {}
    return {p.name: f"{p.name}-value" for p in parameters
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def test_the_hierarchy_is_found() -> None:
    names = {cls.__name__ for cls in _every_error_class()}
    assert {"CorruptFileError", "ConfigError", "CommitConflictError", "WorkerError"} <= names


def test_every_error_names_its_remedy() -> None:
    from paimond import errors

    assert {cls.__name__: cls.kind for cls in _every_error_class()
            if cls.__module__ == "paimond.errors"} == {
        "PaimondError": "internal", "CodecError": "data", "CorruptFileError": "data",
        "MissingFileError": "data", "UnsupportedError": "config", "CommitConflictError": "retry",
        "CommitCancelledError": "retry",
        "StorageUnavailableError": "backoff", "ConfigError": "config", "WorkerError": "internal",
        "BucketsFailedError": "data", "RefusedError": "unsupported",
        "MaintenanceFailedError": "internal", "DaemonUnreachableError": "backoff",
        "AdmissionTimeoutError": "internal"}
    assert {cls.kind for cls in _every_error_class()} <= set(errors.ErrorKind.__args__)
    assert errors.kind_of(errors.ConfigError("k", "r")) == "config"
    assert errors.kind_of(ValueError("not ours")) == "internal"


@pytest.mark.parametrize("cls", _every_error_class(), ids=lambda cls: cls.__name__)
def test_every_error_survives_pickling_with_its_fields(cls: type[PaimondError]) -> None:
    arguments = _sample_arguments(cls)
    error = cls(**arguments) if arguments else cls("a message")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == str(error) and copy.args == error.args
    assert vars(copy) == vars(error)
    for name, value in arguments.items():
        if hasattr(error, name):
            assert getattr(copy, name) == value


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    warehouse = tmp_path_factory.mktemp("errors") / "wh"
    return warehouse, build_pk_deduplicate(str(warehouse))


def _damage_one_bucket(tmp_path: Path, pristine: tuple[Path, Any], damage: str
                       ) -> tuple[str, Any, str, int]:
    warehouse = str(tmp_path / "wh")
    shutil.copytree(pristine[0], warehouse)
    table = open_table(open_storage(warehouse), warehouse, pristine[1].name)
    latest = table.snapshots.latest()
    assert latest is not None
    buckets = scan_snapshot(table, latest).buckets()
    victim = data_file_path(table, table.latest_schema(), next(iter(buckets.values())).files[0])
    path = Path(victim)
    if damage == "garbage":
        path.write_bytes(b"PAR1 this is not a parquet file PAR1")
    else:  # the path becomes a directory: an OSError, not one of ours
        path.unlink()
        path.mkdir()
    return warehouse, table, victim, len(buckets)


@pytest.mark.parametrize("damage", ["garbage", "directory"])
def test_a_workers_error_fails_its_bucket_in_a_process_pool(
        tmp_path: Path, pristine: tuple[Path, Any], damage: str) -> None:
    warehouse, table, victim, buckets = _damage_one_bucket(tmp_path, pristine, damage)
    summary = CompactJob(table, clock=SYSTEM_CLOCK, full=True, use_processes=True, parallelism=2).run()
    assert buckets >= 2
    assert len(summary.failures) == 1, summary.failures
    assert victim in summary.failures[0].error
    assert summary.snapshot is not None and len(summary.results) == buckets - 1


def test_a_library_error_comes_back_as_a_worker_error() -> None:
    error = WorkerError("dt=1 bucket 0", "ClientError", "access denied", "Traceback ...")
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == "dt=1 bucket 0: ClientError: access denied"
    assert copy.traceback_text == "Traceback ..."


def test_a_corrupt_file_error_names_the_file() -> None:
    copy = pickle.loads(pickle.dumps(CorruptFileError("s3://b/t/data.parquet", "truncated")))
    assert copy.path == "s3://b/t/data.parquet" and "s3://b/t/data.parquet" in str(copy)
