"""Avro codecs of manifests, manifest lists and index manifests: round trips, interop with
pypaimon 2.1.0 both ways, and rejection of bad input."""

from __future__ import annotations

import dataclasses
import io
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import fastavro
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st
from pypaimon.manifest.index_manifest_file import INDEX_MANIFEST_ENTRY_SCHEMA as PY_INDEX_SCHEMA
from pypaimon.manifest.schema.manifest_entry import MANIFEST_ENTRY_SCHEMA as PY_ENTRY_SCHEMA
from pypaimon.manifest.schema.manifest_file_meta import MANIFEST_FILE_META_SCHEMA as PY_LIST_SCHEMA
from support.manifest_strategies import blobs, codecs, entry_st, i32, i64, names, opt, stats_st, tuples
from support.pypaimon_manifest_oracle import file_kind, manifest_dir, read_with_pypaimon, write_tables

from paimond.errors import CodecError
from paimond.format.meta import avro_container
from paimond.format.meta.avro_schemas import (
    INDEX_MANIFEST_ENTRY_SCHEMA,
    MANIFEST_ENTRY_SCHEMA,
    MANIFEST_FILE_META_SCHEMA,
)
from paimond.format.meta.index_manifest import (
    INDEX_TYPE_DELETION_VECTORS,
    DeletionVectorMeta,
    GlobalIndexMeta,
    IndexFileMeta,
    IndexManifestEntry,
    decode_index_manifest,
    encode_index_manifest,
)
from paimond.format.meta.manifest import (
    EMPTY_STATS,
    FILE_KIND_ADD,
    DataFileMeta,
    ManifestEntry,
    decode_manifest,
    encode_manifest,
)
from paimond.format.meta.manifest_list import (
    ManifestFileMeta,
    decode_manifest_list,
    encode_manifest_list,
)

DECODE = {"manifest": decode_manifest, "list": decode_manifest_list,
          "index": decode_index_manifest}
ENCODE = {"manifest": encode_manifest, "list": encode_manifest_list,
          "index": encode_index_manifest}

# ------------------------------------------------------------------ strategies


meta_st = st.builds(ManifestFileMeta, names, i64, i64, i64, stats_st, i64, opt(i32), opt(i32),
                    opt(i32), opt(i32), opt(i64), opt(i64))
index_entry_st = st.builds(IndexManifestEntry, st.sampled_from([0, 1]), blobs, i32, st.builds(
    IndexFileMeta, names, names, i64, i64,
    opt(tuples(st.builds(DeletionVectorMeta, names, i32, i32, opt(i64)))), opt(names),
    opt(st.builds(GlobalIndexMeta, i64, i64, i32, opt(tuples(i32)), opt(blobs), opt(blobs)))))


def _round_trip(kind: str, items: list[Any], compression: str) -> None:
    data = ENCODE[kind](items, compression=compression, zstd_level=3)
    decoded = DECODE[kind](data)
    assert decoded == items
    assert DECODE[kind](ENCODE[kind](decoded)) == decoded


@given(st.lists(entry_st, max_size=5), codecs)
def test_manifest_round_trip(entries: list[ManifestEntry], compression: str) -> None:
    _round_trip("manifest", entries, compression)


@given(st.lists(meta_st, max_size=5), codecs)
def test_manifest_list_round_trip(metas: list[ManifestFileMeta], compression: str) -> None:
    _round_trip("list", metas, compression)


@given(st.lists(index_entry_st, max_size=5), codecs)
def test_index_manifest_round_trip(entries: list[IndexManifestEntry], compression: str) -> None:
    _round_trip("index", entries, compression)


def _entry(name: str, **changes: Any) -> ManifestEntry:
    file = DataFileMeta(name, 10, 2, b"k1", b"k2", EMPTY_STATS, EMPTY_STATS, 0, 1, 0, 0, (),
                        1795325288687, 0, None, 0, None, None, None, None, None)
    return ManifestEntry(FILE_KIND_ADD, b"p", 0, 2, dataclasses.replace(file, **changes))


def test_reads_zstd_frames_as_java_writes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    # zstd-jni's stream leaves the content size out of the frame header; frames may be chained.
    def java_like(codec: str, data: bytes, zstd_level: int) -> bytes:
        cctx = zstandard.ZstdCompressor(level=zstd_level, write_content_size=False,
                                        write_checksum=True)
        return cctx.compress(data[:100]) + cctx.compress(data[100:])

    entries = [_entry(f"data-{i}.parquet") for i in range(50)]
    monkeypatch.setattr(avro_container, "_compress", java_like)
    data = encode_manifest(entries)
    monkeypatch.undo()
    frame = data[data.index(b"\x28\xb5\x2f\xfd", _header_end(data)):]  # zstd magic
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decode_manifest(data) == entries


def test_many_entries_span_blocks_and_keep_order() -> None:
    entries = [_entry(f"data-{i}.parquet", extra_files=("x" * 50,)) for i in range(3000)]
    data = encode_manifest(entries)
    assert sum(1 for _ in fastavro.block_reader(io.BytesIO(data))) > 1
    assert decode_manifest(data) == entries


def test_creation_time_is_raw_millis_without_timezone() -> None:
    millis = [1795325288687, -1, 0, 2**63 - 1, -(2**63), 253402300800000]  # beyond datetime
    entries = [_entry("f", creation_time_millis=m) for m in millis]
    data = encode_manifest(entries)
    first = next(iter(fastavro.reader(io.BytesIO(data))))["_FILE"]["_CREATION_TIME"]
    # Stored as a timestamp-millis long, as Java writes it.
    assert first == datetime.fromtimestamp(0, timezone.utc) + timedelta(milliseconds=millis[0])
    assert [e.file.creation_time_millis for e in decode_manifest(data)] == millis


def test_identifier_is_java_file_entry_identifier() -> None:
    e = _entry("f.parquet", level=3, extra_files=("f.index",), embedded_index=b"i",
               external_path="s3://b/f.parquet")
    assert e.identifier == (b"p", 0, 3, "f.parquet", ("f.index",), b"i", "s3://b/f.parquet")


# ------------------------------------------------------------------ schemas


def _shape(schema: Any) -> Any:
    """A schema without record names, defaults and logical types, for comparing structure."""
    if isinstance(schema, list):
        return [_shape(s) for s in schema]
    if isinstance(schema, dict):
        if schema.get("type") == "record":
            return [(f["name"], _shape(f["type"])) for f in schema["fields"]]
        if schema.get("type") == "array":
            return ["array", _shape(schema["items"])]
        return _shape(schema["type"])
    return schema


def test_schemas_match_pypaimon_except_known_differences() -> None:
    assert _shape(MANIFEST_ENTRY_SCHEMA) == _shape(PY_ENTRY_SCHEMA)
    # pypaimon adds two fields Java does not have.
    assert _shape(MANIFEST_FILE_META_SCHEMA) + [
        ("_TOTAL_BUCKETS", ["null", "int"]),
        ("_EXTRA_FILES", ["null", ["array", "string"]]),
    ] == _shape(PY_LIST_SCHEMA)
    # Java's DV ranges array has nullable items (DeletionVectorMeta.SCHEMA is a nullable row).
    ours = _shape(INDEX_MANIFEST_ENTRY_SCHEMA)
    dv_items = dict(ours)["_DELETIONS_VECTORS_RANGES"][1][1]
    assert dv_items[0] == "null"
    assert [(n, t) if n != "_DELETIONS_VECTORS_RANGES" else (n, ["null", ["array", dv_items[1]]])
            for n, t in ours] == _shape(PY_INDEX_SCHEMA)


def test_schemas_follow_java_conventions() -> None:
    for schema in (MANIFEST_ENTRY_SCHEMA, MANIFEST_FILE_META_SCHEMA, INDEX_MANIFEST_ENTRY_SCHEMA):
        assert schema["name"] == "record"
        assert schema["namespace"] == "org.apache.paimon.avro.generated"
        assert schema["fields"][0] == {"name": "_VERSION", "type": "int"}
    files = {f["name"]: f for f in MANIFEST_ENTRY_SCHEMA["fields"]}["_FILE"]["type"]
    assert files["name"] == "record__FILE"
    by_name = {f["name"]: f for f in files["fields"]}
    assert by_name["_CREATION_TIME"] == {"name": "_CREATION_TIME", "default": None, "type": [
        "null", {"type": "long", "logicalType": "timestamp-millis"}]}
    assert by_name["_EXTRA_FILES"]["type"] == {"type": "array", "items": "string"}
    nullable = [f for f in files["fields"] if isinstance(f["type"], list)]
    assert [f["name"] for f in nullable] == [f["name"] for f in files["fields"][12:]]
    assert all(f["type"][0] == "null" and f["default"] is None for f in nullable)


def test_encoded_header_names_codec_and_java_schema() -> None:
    reader = fastavro.reader(io.BytesIO(encode_manifest([_entry("f")])))
    assert reader.metadata["avro.codec"] == "zstandard"
    assert '"name": "record__FILE__KEY_STATS"' in reader.metadata["avro.schema"]


# ------------------------------------------------------------------ interop with pypaimon


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return write_tables(tmp_path_factory.mktemp("wh"))


def _files(table: Any) -> list[Path]:
    return sorted(p for p in manifest_dir(table).iterdir() if not p.name.startswith("copy-"))


def test_pypaimon_tables_have_every_kind_of_file(tables: dict[str, Any]) -> None:
    kinds = {file_kind(p.name) for t in tables.values() for p in _files(t)}
    assert kinds == {"manifest", "list", "index"}
    for codec in ("null", "deflate", "snappy"):
        for path in _files(tables[f"codec_{codec}"]):
            assert fastavro.reader(path.open("rb")).metadata["avro.codec"] == codec
    index_types = {e.index_file.index_type for t in tables.values() for p in _files(t)
                   if file_kind(p.name) == "index" for e in decode_index_manifest(p.read_bytes())}
    assert index_types == {"DELETION_VECTORS", "HASH"}


def test_decode_matches_pypaimon_and_reencode_reads_back(tables: dict[str, Any]) -> None:
    checked = 0
    for table in tables.values():
        for path in _files(table):
            kind = file_kind(path.name)
            ours = DECODE[kind](path.read_bytes())
            expected = read_with_pypaimon(table, path.name, kind)
            assert ours == expected, path
            copy = path.with_name(f"copy-{path.name}")
            copy.write_bytes(ENCODE[kind](ours))
            assert read_with_pypaimon(table, copy.name, kind) == expected, path
            checked += 1
    assert checked >= 30


def test_pypaimon_reads_every_optional_field_paimond_writes(tables: dict[str, Any]) -> None:
    table = tables["pk"]
    path = next(p for p in _files(table) if file_kind(p.name) == "manifest")
    original = decode_manifest(path.read_bytes())
    changed = [dataclasses.replace(e, kind=i % 2, file=dataclasses.replace(
        e.file, extra_files=("a.index", "b.index"), creation_time_millis=1795325288687 + i,
        delete_row_count=None, embedded_index=b"\x01\x02", file_source=1, value_stats_cols=None,
        external_path=f"file:/ext/{e.file.file_name}", first_row_id=7 * i,
        write_cols=("id", "v"), write_cols_sequences=(1, 2), level=5))
        for i, e in enumerate(original)]
    (path.parent / "copy-all-fields").write_bytes(encode_manifest(changed))
    assert read_with_pypaimon(table, "copy-all-fields", "manifest") == changed


def test_pypaimon_reads_global_index_paimond_writes(tables: dict[str, Any]) -> None:
    table = tables["dv"]
    index_path = next(p for p in _files(table) if file_kind(p.name) == "index")
    partition = decode_index_manifest(index_path.read_bytes())[0].partition
    entries = [
        IndexManifestEntry(0, partition, 0, IndexFileMeta(
            "btree", "index-g-1", 100, 10, None, "file:/ext/index-g-1",
            GlobalIndexMeta(0, 99, 3, (4, 5), b"meta", None))),
        IndexManifestEntry(0, partition, 1, IndexFileMeta(
            INDEX_TYPE_DELETION_VECTORS, "index-dv-1", 50, 2,
            (DeletionVectorMeta("data-1.parquet", 1, 22, None),
             DeletionVectorMeta("data-2.parquet", 23, 22, 3)), None, None)),
    ]
    (manifest_dir(table) / "copy-index-global").write_bytes(encode_index_manifest(entries))
    assert read_with_pypaimon(table, "copy-index-global", "index") == entries


# ------------------------------------------------------------------ bad input


def _header_end(data: bytes) -> int:
    sync = fastavro.reader(io.BytesIO(data))._header["sync"]
    return data.index(sync) + len(sync)


@pytest.mark.parametrize("kind", ["manifest", "list", "index"])
def test_every_truncation_raises_codec_error(kind: str) -> None:
    items = {"manifest": [_entry("a"), _entry("b")],
             "list": [ManifestFileMeta("m", 1, 1, 0, EMPTY_STATS, 0, 0, 1, 0, 0, None, None)],
             "index": [IndexManifestEntry(0, b"p", 0, IndexFileMeta(
                 "HASH", "i", 1, 1, None, None, None))]}[kind]
    data = ENCODE[kind](items)
    for size in [*range(0, _header_end(data), 7), *range(_header_end(data) + 1, len(data))]:
        with pytest.raises(CodecError):
            DECODE[kind](data[:size])


@given(st.binary(max_size=200))
def test_garbage_raises_codec_error(garbage: bytes) -> None:
    for data in (garbage, b"Obj\x01" + garbage):
        with pytest.raises(CodecError):
            decode_manifest(data)


def test_wrong_sync_marker_and_bad_zstd_raise_codec_error() -> None:
    data = bytearray(encode_manifest([_entry("a")]))
    broken_sync = bytes(data[:-1]) + bytes([data[-1] ^ 0xFF])
    with pytest.raises(CodecError, match="sync marker"):
        decode_manifest(broken_sync)
    start = _header_end(bytes(data))
    for _ in range(2):  # the block's record count and byte size are varints
        while data[start] & 0x80:
            start += 1
        start += 1
    data[start:start + 4] = b"\0\0\0\0"  # clobber the zstd magic
    with pytest.raises(CodecError, match="zstd|ZstdError"):
        decode_manifest(bytes(data))


def _avro(schema: dict[str, Any], records: list[dict[str, Any]]) -> bytes:
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, codec="null")
    return buf.getvalue()


def _record(entry: ManifestEntry) -> dict[str, Any]:
    return next(iter(fastavro.reader(io.BytesIO(encode_manifest([entry], compression="null")))))


def test_unknown_versions_raise_codec_error() -> None:
    record = _record(_entry("a"))
    with pytest.raises(CodecError, match="_VERSION 1, expected 2"):
        decode_manifest(_avro(MANIFEST_ENTRY_SCHEMA, [{**record, "_VERSION": 1}]))
    meta = ManifestFileMeta("m", 1, 1, 0, EMPTY_STATS, 0, None, None, None, None, None, None)
    list_record = next(iter(fastavro.reader(io.BytesIO(encode_manifest_list([meta])))))
    with pytest.raises(CodecError, match="_VERSION 3, expected 2"):
        decode_manifest_list(_avro(MANIFEST_FILE_META_SCHEMA, [{**list_record, "_VERSION": 3}]))
    index = IndexManifestEntry(0, b"p", 0, IndexFileMeta("HASH", "i", 1, 1, None, None, None))
    index_record = next(iter(fastavro.reader(io.BytesIO(encode_index_manifest([index])))))
    with pytest.raises(CodecError, match="_VERSION 2, expected 1"):
        decode_index_manifest(_avro(INDEX_MANIFEST_ENTRY_SCHEMA, [{**index_record, "_VERSION": 2}]))


def _without_fields(schema: dict[str, Any], drop: set[str]) -> dict[str, Any]:
    files = next(f for f in schema["fields"] if f["name"] == "_FILE")["type"]
    kept = [f for f in files["fields"] if f["name"] not in drop]
    fields = [f if f["name"] != "_FILE" else {"name": "_FILE", "type": {**files, "fields": kept}}
              for f in schema["fields"]]
    return {**schema, "fields": fields}


def test_missing_optional_fields_read_as_none_and_extra_fields_are_skipped() -> None:
    newer = [f["name"] for f in _without_fields(MANIFEST_ENTRY_SCHEMA, set())["fields"][5]
             ["type"]["fields"][13:]]  # _DELETE_ROW_COUNT .. _WRITE_COLS_SEQUENCES
    schema = _without_fields(MANIFEST_ENTRY_SCHEMA, set(newer))
    schema["fields"].append({"name": "_FUTURE", "type": ["null", "string"], "default": None})
    entry = _entry("a", delete_row_count=3, file_source=1, value_stats_cols=("v",),
                   first_row_id=5, write_cols=("v",), write_cols_sequences=(1,))
    record = _record(entry)
    record["_FILE"] = {k: v for k, v in record["_FILE"].items() if k not in newer}
    record["_FUTURE"] = "x"
    decoded = decode_manifest(_avro(schema, [record]))
    assert decoded == [_entry("a", delete_row_count=None, file_source=None)]


def test_missing_required_field_raises_codec_error() -> None:
    record = _record(_entry("a"))
    del record["_FILE"]["_ROW_COUNT"]
    data = _avro(_without_fields(MANIFEST_ENTRY_SCHEMA, {"_ROW_COUNT"}), [record])
    with pytest.raises(CodecError, match="_ROW_COUNT"):
        decode_manifest(data)


def test_null_dv_range_element_raises_codec_error() -> None:
    index = IndexManifestEntry(0, b"p", 0, IndexFileMeta(
        INDEX_TYPE_DELETION_VECTORS, "i", 1, 1, (DeletionVectorMeta("d", 1, 2, None),), None,
        None))
    record = next(iter(fastavro.reader(io.BytesIO(encode_index_manifest([index])))))
    record["_DELETIONS_VECTORS_RANGES"] = [None]
    with pytest.raises(CodecError, match="null element"):
        decode_index_manifest(_avro(INDEX_MANIFEST_ENTRY_SCHEMA, [record]))


def test_encode_rejects_unknown_compression_and_out_of_range_values() -> None:
    with pytest.raises(ValueError, match="lz4"):
        encode_manifest([_entry("a")], compression="lz4")
    with pytest.raises(ValueError, match="fit"):
        encode_manifest([dataclasses.replace(_entry("a"), bucket=2**31)])
