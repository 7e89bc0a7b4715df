"""A table's merge function settings: Java ``CoreOptions`` ``merge-engine``, ``*.ignore-delete``,
``sequence.field``, ``fields.<c>.aggregate-function`` / ``ignore-retract`` (apache/paimon
5dacde516b), as ``TableOptions`` reads them, per field of the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from paimond.errors import ConfigError, UnsupportedError
from paimond.format.meta.schema import TableSchema
from paimond.table.options.core import TableOptions

ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
# the fields.<c>.<suffix> options of nested_update, nested_partial_update, merge_map_with_keytime
NESTED_SUFFIXES = ("nested-key", "nested-key-null-strategy", "nested-sequence-field",
                   "count-limit", "ts-field")


@dataclass(frozen=True, slots=True)
class MergeConfig:
    engine: str = "deduplicate"
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    aggregate_functions: Mapping[str, str] = field(default_factory=dict)
    ignore_retract: frozenset[str] = frozenset()
    sequence_fields: tuple[str, ...] = ()
    sequence_descending: bool = False
    # partial-update: (sequence fields, protected fields) per fields.<s>.sequence-group
    sequence_groups: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = ()
    remove_record_on_sequence_group: tuple[str, ...] = ()
    # partial-update: fields with an aggregate function (Java getAggFuncName)
    partial_aggregates: Mapping[str, str] = field(default_factory=dict)
    aggregation_remove_record_on_delete: bool = False
    list_agg_delimiters: Mapping[str, str] = field(default_factory=dict)
    distinct: frozenset[str] = frozenset()
    # fields.<c>.{nested-key, ..., ts-field}: suffix -> column -> value (lsm/merge/nested_aggregates.py)
    nested_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def of(cls, schema: TableSchema) -> MergeConfig:
        options = TableOptions.of(schema)
        engine = options.merge_engine
        if engine not in ENGINES:
            raise UnsupportedError(f"merge-engine {engine!r}")
        sequence = options.sequence_fields
        default = options.default_aggregate_function
        functions = {}
        for f in schema.fields:
            if f.name in schema.primary_keys:
                functions[f.name] = "primary-key"
            elif f.name in sequence:
                functions[f.name] = "last_value"
            else:
                functions[f.name] = options.field_aggregate_function(f.name, default)
        return cls(
            engine=engine, ignore_delete=options.ignore_delete,
            remove_record_on_delete=options.partial_update_remove_record_on_delete,
            aggregate_functions=functions,
            ignore_retract=frozenset(f.name for f in schema.fields
                                     if options.field_ignore_retract(f.name)),
            sequence_fields=sequence,
            sequence_descending=options.sequence_descending,
            sequence_groups=options.sequence_groups if engine == "partial-update" else (),
            remove_record_on_sequence_group=options.partial_update_remove_record_on_sequence_group,
            partial_aggregates=_partial_aggregates(schema, options) if engine == "partial-update"
            else {},
            aggregation_remove_record_on_delete=options.aggregation_remove_record_on_delete,
            list_agg_delimiters={f.name: options.field_list_agg_delimiter(f.name)
                                 for f in schema.fields},
            distinct=frozenset(f.name for f in schema.fields if options.field_distinct(f.name)),
            nested_options={suffix: options.field_options(suffix) for suffix in NESTED_SUFFIXES},
        )


def _partial_aggregates(schema: TableSchema, options: TableOptions) -> dict[str, str]:
    """Java ``PartialUpdateMergeFunction.getAggFuncName``: no function for sequence-group
    fields, ``primary-key`` for keys, else the field's or the default function; a function
    other than last_non_null_value needs a sequence group (ConfigError otherwise)."""
    groups = options.sequence_groups
    sequence = {name for fields, _ in groups for name in fields}
    protected = {name for _, names in groups for name in names}
    default = options.raw_default_aggregate_function
    out = {}
    for f in schema.fields:
        if f.name in sequence:
            continue
        if f.name in schema.primary_keys:
            out[f.name] = "primary-key"
            continue
        function = options.raw.get(f"fields.{f.name}.aggregate-function") or default
        if function is None:
            continue
        if function != "last_non_null_value" and f.name not in protected:
            raise ConfigError(f"fields.{f.name}.aggregate-function",
                              f"{function!r} under partial-update needs the field in a "
                              "sequence group (Paimon refuses it too)")
        out[f.name] = function
    return out
