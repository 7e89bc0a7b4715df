"""What a bucket compaction wrote, for tests: the rows of its files, and a writer that finishes
a file per batch and lists the files it finished."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from paimond.format.meta.manifest import ManifestEntry
from paimond.lsm.rewrite import file_format_of
from paimond.lsm.task import CompactTask
from paimond.table.data_files.arrow_io import RollingDataFileWriter, read_data_file
from paimond.table.storage.interface import Storage


def entry_rows(storage: Storage, task: CompactTask, entries: tuple[ManifestEntry, ...]
               ) -> pa.Table:
    """The rows of ``entries``' files, every column, in file order."""
    batches = []
    for entry in entries:
        meta = entry.file
        path = meta.external_path or storage.join(task.directory, meta.file_name)
        batches += read_data_file(storage, path, file_format=file_format_of(meta.file_name),
                                  file_schema=task.table.schema_of(meta.schema_id),
                                  read_schema=task.table.schema, key_value=True,
                                  file_size=meta.file_size)
    return pa.Table.from_batches(batches) if batches else pa.table({})


def file_per_batch_writer(published: list[str]) -> type[RollingDataFileWriter]:
    """A rolling writer that finishes a file after every batch and appends each finished
    file's name to ``published``."""

    class FilePerBatch(RollingDataFileWriter):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._target_bytes = 1

        def _roll(self) -> None:
            super()._roll()
            published.extend(m.file_name for m in self._written[len(published):])

    return FilePerBatch
