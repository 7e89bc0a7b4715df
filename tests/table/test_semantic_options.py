"""The semantic-options table: which option makes which job refuse a table, the duties derived
from it, and the copy of the table in docs/table-options.md."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import pytest

from paimond.errors import RefusedError, kind_of
from paimond.format.meta.schema import decode_schema
from paimond.lsm.merge import engines as merge_engines
from paimond.maintenance.jobs import JOBS
from paimond.table.duties import duties
from paimond.table.options.core import TableOptions
from paimond.table.options.semantic import (
    AGGREGATE_FUNCTIONS,
    SEMANTIC_OPTIONS,
    fingerprint,
    markdown_table,
    refusals,
    refuse,
)

TABLE_OPTIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "table-options.md"
# jobs no registry entry performs yet: each is a duty the table refuses until its job lands
DUTY_JOBS = {"expire_changelogs"}


def _options(raw: dict[str, str], *, primary_key: bool = True) -> TableOptions:
    return TableOptions(raw, 3, primary_key)


def _settings(options: TableOptions, job: str) -> list[str]:
    return [r.setting for r in refusals(options, job)]


def test_the_supported_aggregate_functions_are_the_reducers() -> None:
    assert merge_engines.SUPPORTED == AGGREGATE_FUNCTIONS


def test_a_plain_primary_key_table_is_refused_by_no_job() -> None:
    for engine in ("deduplicate", "partial-update", "aggregation", "first-row"):
        options = _options({"merge-engine": engine, "bucket": "4", "sequence.field": "ts",
                            "fields.v.aggregate-function": "sum", "ignore-delete": "true",
                            "file-index.bloom-filter.columns": "v"})
        for job in (*JOBS, *DUTY_JOBS):
            assert refusals(options, job) == [], (engine, job)


def test_an_unimplemented_function_refuses_compaction_only() -> None:
    options = _options({"merge-engine": "aggregation", "fields.total.aggregate-function": "sum",
                        "fields.tags.aggregate-function": "my_udf",
                        "fields.names.aggregate-function": "listagg"})
    assert _settings(options, "compact") == ["fields.tags.aggregate-function=my_udf"]
    assert "aggregate function" in refusals(options, "compact")[0].reason
    for job in set(JOBS) - {"compact"}:
        assert refusals(options, job) == [], job
    # only the aggregation and partial-update (sequence groups) engines read them
    assert refusals(_options({"fields.tags.aggregate-function": "my_udf"}), "compact") == []
    grouped = _options({"merge-engine": "partial-update", "fields.g.sequence-group": "tags",
                        "fields.tags.aggregate-function": "my_udf"})
    assert _settings(grouped, "compact") == ["fields.tags.aggregate-function=my_udf"]
    default = _options({"merge-engine": "aggregation",
                        "fields.default-aggregate-function": "com.example.MyAgg"})
    assert _settings(default, "compact") == ["fields.default-aggregate-function=com.example.MyAgg"]


@pytest.mark.parametrize(("raw", "setting"), [
    ({"pk-clustering-override": "TRUE", "clustering.columns": "v"}, "pk-clustering-override=true"),
    ({"sequence.snapshot-ordering": "true"}, "sequence.snapshot-ordering=true"),
    ({"changelog-producer": "full-compaction", "deletion-vectors.enabled": "true"},
     "changelog-producer=full-compaction with deletion-vectors.enabled=true"),
    ({"merge-engine": "first-row", "deletion-vectors.enabled": "true"},
     "merge-engine=first-row with deletion-vectors.enabled=true"),
    ({"merge-engine": "dedup"}, "merge-engine=dedup"),
    ({"file.format": "lance"}, "file.format=lance"),
])
def test_each_unimplemented_setting_refuses_compaction(raw: dict[str, str], setting: str) -> None:
    assert _settings(_options(raw), "compact") == [setting]


def test_false_flags_refuse_nothing() -> None:
    options = _options({"pk-clustering-override": "false", "sequence.snapshot-ordering": "false",
                        "partial-update.remove-record-on-delete": "false"})
    assert refusals(options, "compact") == []


def test_append_tables_are_compacted_but_refused_by_rebuild_dv() -> None:
    append = _options({"bucket": "-1"}, primary_key=False)
    assert refusals(append, "compact") == []
    assert _settings(append, "rebuild_dv") == ["no primary key (append table)"]
    assert refusals(append, "expire") == refusals(append, "merge_manifests") == []
    for bucket in ("-1", "3"):
        dv = _options({"bucket": bucket, "deletion-vectors.enabled": "true"}, primary_key=False)
        assert refusals(dv, "compact") == []
    clustered = _options({"bucket": "-1", "clustering.incremental": "true"}, primary_key=False)
    assert refusals(clustered, "compact") == []  # clustered: maintenance/compact/cluster_plan.py


def test_decoupled_changelog_is_expired_by_expire() -> None:
    options = _options({"changelog.num-retained.max": "50", "snapshot.num-retained.max": "10"})
    assert refusals(options, "expire") == []
    changelog = {d.name: d for d in duties(options)}["changelog expiry"]
    assert (changelog.performer, changelog.detail) == ("paimond", "expire")


def test_duties_of_write_only_writers_fall_to_paimond() -> None:
    raw = {"partition.expiration-time": "7 d", "tag.automatic-creation": "process-time",
           "consumer.expiration-time": "1 d", "deletion-vectors.enabled": "true"}
    shared = {d.name: d.performer for d in duties(_options(raw))}
    assert shared["partition expiry"] == shared["tag creation"] == "writers"
    assert shared["consumer expiry"] == "writers"
    assert shared["deletion-vector maintenance"] == shared["compaction"] == "paimond"
    assert shared["tag expiry"] == shared["record-level expiry"] == "not needed"
    assert shared["changelog expiry"] == shared["file indexes"] == "not needed"
    alone = {d.name: d for d in duties(_options(raw | {"write-only": "true"}))}
    assert {name: (d.performer, d.detail) for name, d in alone.items()
            if name in ("partition expiry", "tag creation", "consumer expiry")} == {
        "partition expiry": ("paimond", "expire_partitions"), "tag creation": ("paimond", "tags"),
        "consumer expiry": ("paimond", "expire_consumers")}
    assert alone["manifest merging"].performer == alone["snapshot expiry"].performer == "paimond"
    refused = {d.name: d for d in duties(_options(
        {"record-level.expire-time": "1 d", "changelog-producer": "input",
         "changelog.time-retained": "2 d", "merge-engine": "aggregation",
         "fields.v.aggregate-function": "my_udf"}))}
    assert refused["record-level expiry"].performer == refused["compaction"].performer == "refused"
    assert "fields.v.aggregate-function=my_udf" in refused["record-level expiry"].detail
    assert refused["changelog expiry"].performer == refused["snapshot expiry"].performer == "paimond"


def test_refuse_raises_a_picklable_refusal_with_the_fingerprint() -> None:
    schema = decode_schema(_schema_json({"merge-engine": "aggregation",
                                                 "fields.v.aggregate-function": "my_udf"}))
    with pytest.raises(RefusedError) as caught:
        refuse(schema, "compact", "/wh/db.db/t")
    error = caught.value
    assert kind_of(error) == "unsupported" and error.job == "compact"
    assert error.fingerprint == fingerprint(schema) and error.fingerprint.startswith("0:")
    assert "fields.v.aggregate-function=my_udf" in str(error) and "/wh/db.db/t" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is RefusedError and vars(copy) == vars(error)
    refuse(schema, "expire")  # the other jobs run
    changed = decode_schema(_schema_json({"merge-engine": "aggregation",
                                                  "fields.v.aggregate-function": "sum"}))
    assert fingerprint(changed) != fingerprint(schema)


def test_every_refused_row_can_trigger_and_names_known_jobs() -> None:
    for row in SEMANTIC_OPTIONS:
        assert set(row.jobs) <= set(JOBS) | DUTY_JOBS, row.option
        assert (row.setting.__name__ != "_never") == (row.handling == "refused"), row.option
        assert row.note, row.option


def test_the_docs_show_the_module_table() -> None:
    text = TABLE_OPTIONS_PAGE.read_text()
    match = re.search(r"<!-- semantic-options: begin -->\n(.*?)\n<!-- semantic-options: end -->",
                      text, re.S)
    assert match, "docs/table-options.md lacks the semantic-options section"
    assert match.group(1).strip() == markdown_table()


def _schema_json(options: dict[str, str]) -> bytes:
    return json.dumps({
        "version": 3, "id": 0, "fields": [
            {"id": 0, "name": "k", "type": "INT NOT NULL"}, {"id": 1, "name": "v", "type": "STRING"}],
        "highestFieldId": 1, "partitionKeys": [], "primaryKeys": ["k"], "options": options,
        "timeMillis": 0}).encode()
