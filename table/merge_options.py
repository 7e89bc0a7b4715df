"""A table's merge function settings: Java ``CoreOptions`` ``merge-engine``, ``*.ignore-delete``,
``sequence.field``, ``fields.<c>.aggregate-function`` / ``ignore-retract`` (apache/paimon
5dacde516b), as ``TableOptions`` reads them, per field of the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from paimond.errors import UnsupportedError
from paimond.format.schema import TableSchema
from paimond.table.options import TableOptions

ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")


@dataclass(frozen=True, slots=True)
class MergeConfig:
    engine: str = "deduplicate"
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    aggregate_functions: Mapping[str, str] = field(default_factory=dict)
    ignore_retract: frozenset[str] = frozenset()
    sequence_fields: tuple[str, ...] = ()
    sequence_descending: bool = False

    @classmethod
    def of(cls, schema: TableSchema) -> MergeConfig:
        options = TableOptions.of(schema)
        engine = options.merge_engine
        if engine not in ENGINES:
            raise UnsupportedError(f"merge-engine {engine!r}")
        if options.has_sequence_groups:
            raise UnsupportedError("partial-update sequence groups (fields.*.sequence-group) "
                                   "are not supported by paimond yet")
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
        )
