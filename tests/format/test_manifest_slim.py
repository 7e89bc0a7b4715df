"""The planning view of manifests (format.manifest_slim) against the whole decoder."""

from __future__ import annotations

import copy
import io

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.manifest_strategies import codecs, entry_st

from paimond.errors import CodecError
from paimond.format.meta.avro_container import read_records, read_records_at
from paimond.format.meta.avro_schemas import MANIFEST_ENTRY_SCHEMA
from paimond.format.meta.manifest import (
    EMPTY_STATS,
    FILE_KIND_ADD,
    FILE_KIND_DELETE,
    DataFileMeta,
    ManifestEntry,
    decode_manifest,
    encode_manifest,
)
from paimond.format.meta.manifest_slim import (
    decode_manifest_added,
    decode_manifest_slim,
    decode_manifest_slim_whole,
)


def _as_slim(e: ManifestEntry) -> tuple[object, ...]:
    f = e.file
    return (e.kind, e.partition, e.bucket, e.total_buckets, f.level, f.file_name, f.extra_files,
            f.embedded_index, f.external_path, f.file_size, f.min_key, f.min_sequence_number,
            f.max_sequence_number, f.schema_id, f.creation_time_millis, f.row_count)


@given(st.lists(entry_st, max_size=6), codecs)
def test_slim_entries_are_the_whole_entries_fields(entries: list[ManifestEntry],
                                                   compression: str) -> None:
    data = encode_manifest(entries, compression=compression)
    assert [tuple(s) for s in decode_manifest_slim(data)] == [_as_slim(e) for e in entries]


@given(st.lists(entry_st, max_size=6), codecs, st.integers(0, 3))
def test_entries_kept_whole_are_the_whole_decoders(entries: list[ManifestEntry],
                                                   compression: str, modulo: int) -> None:
    data = encode_manifest(entries, compression=compression)
    slim, kept = decode_manifest_slim_whole(data, lambda e: e.file_size % 4 >= modulo)
    assert slim == decode_manifest_slim(data)
    assert kept == {at: e for at, e in enumerate(decode_manifest(data))
                    if e.kind == FILE_KIND_ADD and e.file.file_size % 4 >= modulo}


def _entry(i: int, kind: int = FILE_KIND_ADD) -> ManifestEntry:
    file = DataFileMeta(f"data-{i}.parquet", 10 + i, 2, b"k1", b"k2", EMPTY_STATS, EMPTY_STATS,
                        i, i + 1, 0, i % 3, ("x" * 40,), None, 0, None, 0, None, None, None,
                        None, None)
    return ManifestEntry(kind, b"p", i % 2, 2, file)


def test_records_at_positions_read_only_their_blocks_and_match_the_whole_read() -> None:
    entries = [_entry(i) for i in range(3000)]
    data = encode_manifest(entries)
    blocks = [b.num_records for b in fastavro.block_reader(io.BytesIO(data))]
    assert len(blocks) > 3
    every = read_records(data)
    wanted = [0, blocks[0] - 1, blocks[0] + blocks[1] + 5, 2999]
    assert read_records_at(data, wanted) == {at: every[at] for at in wanted}
    assert read_records_at(data, [5000]) == {}
    third = sum(blocks[:2])
    assert decode_manifest_added(data, {third - 1: entries[third - 1].identifier}) == [
        entries[third - 1]]
    picked = {7: entries[7].identifier, 2999: entries[2999].identifier}
    assert decode_manifest_added(data, picked) == [entries[7], entries[2999]]


def test_added_refuses_an_entry_that_is_not_the_add_read_before() -> None:
    entries = [_entry(0), _entry(1, FILE_KIND_DELETE), _entry(2)]
    data = encode_manifest(entries)
    with pytest.raises(CodecError, match="entry 1 is not the ADD"):
        decode_manifest_added(data, {1: entries[1].identifier})
    with pytest.raises(CodecError, match="entry 0 is not the ADD"):
        decode_manifest_added(data, {0: entries[2].identifier})
    with pytest.raises(CodecError, match="entry 9 was read before"):
        decode_manifest_added(data, {9: entries[2].identifier})


def _without(field: str, where: str) -> bytes:
    """A one-entry manifest whose schema lacks ``field`` (of ``_FILE`` or its stats)."""
    changed = copy.deepcopy(MANIFEST_ENTRY_SCHEMA)
    file_type = next(f for f in changed["fields"] if f["name"] == "_FILE")["type"]
    target = file_type if where == "_FILE" else next(
        f for f in file_type["fields"] if f["name"] == where)["type"]
    target["fields"] = [f for f in target["fields"] if f["name"] != field]
    record = {"_VERSION": 2, "_KIND": 0, "_PARTITION": b"p", "_BUCKET": 0, "_TOTAL_BUCKETS": 1,
              "_FILE": {"_FILE_NAME": "f", "_FILE_SIZE": 1, "_ROW_COUNT": 1, "_MIN_KEY": b"",
                        "_MAX_KEY": b"", "_MIN_SEQUENCE_NUMBER": 0, "_MAX_SEQUENCE_NUMBER": 0,
                        "_SCHEMA_ID": 0, "_LEVEL": 0, "_EXTRA_FILES": [],
                        "_KEY_STATS": {"_MIN_VALUES": b"", "_MAX_VALUES": b""},
                        "_VALUE_STATS": {"_MIN_VALUES": b"", "_MAX_VALUES": b""}}}
    out = io.BytesIO()
    fastavro.writer(out, changed, [record])
    return out.getvalue()


@pytest.mark.parametrize(("field", "where"), [("_ROW_COUNT", "_FILE"), ("_MAX_KEY", "_FILE"),
                                              ("_MIN_VALUES", "_KEY_STATS"),
                                              ("_MAX_VALUES", "_VALUE_STATS")])
def test_a_required_field_the_planner_does_not_read_is_still_required(field: str,
                                                                      where: str) -> None:
    data = _without(field, where)
    for decode in (decode_manifest, decode_manifest_slim):
        with pytest.raises(CodecError, match=f"lacks required field {field}"):
            decode(data)
