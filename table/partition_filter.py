"""A partition filter: the ``where`` of Paimon's compact procedure (``CompactProcedure`` and
``SparkProcedureUtils.convertToPartitionPredicate``, release-2.0.0), a SQL boolean expression
over the partition columns only, matched against a partition's path (``dt=2024-01-01/hh=10``).

The grammar is SQL's: ``=``, ``!=``/``<>``, ``<``, ``<=``, ``>``, ``>=``, ``[NOT] IN (...)``,
``[NOT] BETWEEN .. AND ..``, ``IS [NOT] NULL``, ``AND``, ``OR``, ``NOT`` and parentheses.
A literal takes its column's type (``hh = '10'`` on an int ``hh`` compares numbers); ``DATE
'..'`` and ``TIMESTAMP '..'`` literals are typed already. Nulls follow SQL's three-valued
logic: a comparison with a null (the default partition) is unknown, and only a partition whose
predicate is true matches.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, TypeAlias

from paimond.errors import ConfigError
from paimond.format.types.data_types import (
    BigIntType,
    BooleanType,
    CharType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    LocalZonedTimestampType,
    SmallIntType,
    TimestampType,
    TinyIntType,
    VarCharType,
)

if TYPE_CHECKING:
    from paimond.format.meta.schema import TableSchema

OPTION = "--where"
Value: TypeAlias = str | Decimal | bool | datetime.date | datetime.datetime | None

# ---- syntax --------------------------------------------------------------------------------

_TOKEN = re.compile(r"""\s*(?:
    (?P<string>'(?:[^']|'')*')
  | (?P<quoted>`(?:[^`]|``)+`)
  | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<op><=|>=|<>|!=|==|=|<|>|\(|\)|,)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<bad>\S))""", re.VERBOSE)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE", "DATE",
             "TIMESTAMP"}


@dataclass(frozen=True, slots=True)
class Literal:
    kind: str  # string, number, bool, date, timestamp, null
    text: str


@dataclass(frozen=True, slots=True)
class Comparison:
    column: str
    op: str  # = != < <= > >=
    literal: Literal


@dataclass(frozen=True, slots=True)
class InList:
    column: str
    literals: tuple[Literal, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class IsNull:
    column: str
    negated: bool


@dataclass(frozen=True, slots=True)
class Not:
    operand: Expression


@dataclass(frozen=True, slots=True)
class And:
    left: Expression
    right: Expression


@dataclass(frozen=True, slots=True)
class Or:
    left: Expression
    right: Expression


Expression: TypeAlias = "Comparison | InList | IsNull | Not | And | Or"
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    for match in _TOKEN.finditer(text.rstrip()):
        kind = match.lastgroup or "bad"
        value = match.group(kind)
        if kind == "bad":
            raise ConfigError(OPTION, f"unexpected {value!r} in {text!r}")
        if kind == "word" and value.upper() in _KEYWORDS:
            kind, value = "keyword", value.upper()
        out.append((kind, value))
    return out


class _Parser:
    """Recursive descent: or > and > not > comparison, each level a method."""

    def __init__(self, text: str) -> None:
        self.text, self.tokens, self.at = text, _tokens(text), 0

    def fail(self, wanted: str) -> ConfigError:
        found = self.tokens[self.at][1] if self.at < len(self.tokens) else "the end"
        return ConfigError(OPTION, f"expected {wanted}, found {found!r} in {self.text!r}")

    def peek(self, *values: str) -> bool:
        return self.at < len(self.tokens) and self.tokens[self.at][1] in values \
            and self.tokens[self.at][0] in ("keyword", "op")

    def take(self, value: str) -> None:
        if not self.peek(value):
            raise self.fail(value)
        self.at += 1

    def expression(self) -> Expression:
        left = self.conjunction()
        while self.peek("OR"):
            self.at += 1
            left = Or(left, self.conjunction())
        return left

    def conjunction(self) -> Expression:
        left = self.negation()
        while self.peek("AND"):
            self.at += 1
            left = And(left, self.negation())
        return left

    def negation(self) -> Expression:
        if self.peek("NOT"):
            self.at += 1
            return Not(self.negation())
        if self.peek("("):
            self.at += 1
            inner = self.expression()
            self.take(")")
            return inner
        return self.predicate()

    def predicate(self) -> Expression:
        if self.at < len(self.tokens) and self.tokens[self.at][0] not in ("word", "quoted"):
            literal = self.literal()  # a literal on the left: 'x' = dt
            op = self.operator()
            return Comparison(self.column(), _FLIPPED[op], literal)
        column = self.column()
        if self.peek("IS"):
            self.at += 1
            negated = self.peek("NOT")
            self.at += negated
            self.take("NULL")
            return IsNull(column, negated)
        negated = self.peek("NOT")
        self.at += negated
        if self.peek("IN"):
            self.at += 1
            self.take("(")
            literals = [self.literal()]
            while self.peek(","):
                self.at += 1
                literals.append(self.literal())
            self.take(")")
            return InList(column, tuple(literals), negated)
        if self.peek("BETWEEN"):
            self.at += 1
            low = self.literal()
            self.take("AND")
            between = And(Comparison(column, ">=", low), Comparison(column, "<=", self.literal()))
            return Not(between) if negated else between
        if negated:
            raise self.fail("IN or BETWEEN after NOT")
        return Comparison(column, self.operator(), self.literal())

    def operator(self) -> str:
        if not self.peek("=", "==", "!=", "<>", "<", "<=", ">", ">="):
            raise self.fail("a comparison operator")
        op = self.tokens[self.at][1]
        self.at += 1
        return {"==": "=", "<>": "!="}.get(op, op)

    def column(self) -> str:
        if self.at >= len(self.tokens) or self.tokens[self.at][0] not in ("word", "quoted"):
            raise self.fail("a partition column")
        kind, value = self.tokens[self.at]
        self.at += 1
        return value[1:-1].replace("``", "`") if kind == "quoted" else value

    def literal(self) -> Literal:
        if self.at >= len(self.tokens):
            raise self.fail("a literal")
        kind, value = self.tokens[self.at]
        self.at += 1
        if kind == "string":
            return Literal("string", value[1:-1].replace("''", "'"))
        if kind == "number":
            return Literal("number", value)
        if kind == "keyword" and value in ("TRUE", "FALSE"):
            return Literal("bool", value.lower())
        if kind == "keyword" and value == "NULL":
            return Literal("null", "")
        if kind == "keyword" and value in ("DATE", "TIMESTAMP") and self.at < len(self.tokens) \
                and self.tokens[self.at][0] == "string":
            text = self.tokens[self.at][1][1:-1]
            self.at += 1
            return Literal(value.lower(), text)
        self.at -= 1
        raise self.fail("a literal")


def parse_where(text: str) -> Expression:
    """The expression of ``text``; ConfigError (``--where``) naming what is wrong."""
    parser = _Parser(text)
    if not parser.tokens:
        raise ConfigError(OPTION, "is empty")
    expression = parser.expression()
    if parser.at != len(parser.tokens):
        raise parser.fail("AND, OR or the end")
    return expression


# ---- values --------------------------------------------------------------------------------

_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?")
_DOMAINS: tuple[tuple[tuple[type[DataType], ...], str], ...] = (
    ((CharType, VarCharType), "string"),
    ((TinyIntType, SmallIntType, IntType, BigIntType, DecimalType, FloatType, DoubleType),
     "number"),
    ((BooleanType,), "bool"),
    ((DateType,), "date"),
    ((TimestampType, LocalZonedTimestampType), "timestamp"),
)


def _domain(data_type: DataType) -> str | None:
    return next((domain for types, domain in _DOMAINS if isinstance(data_type, types)), None)


def _number(text: str) -> Decimal | None:
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        return None
    return None if value.is_nan() else value


def _timestamp(text: str) -> datetime.datetime | None:
    match = _TIMESTAMP.fullmatch(text.strip())
    if match is None:
        return None
    y, mo, d, h, mi, s, fraction = match.groups()
    micros = int((fraction or "0").ljust(9, "0")[:6])
    try:
        return datetime.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0),
                                 micros)
    except ValueError:
        return None


def _date(text: str) -> datetime.date | None:
    match = _TIMESTAMP.fullmatch(text.strip())
    if match is None or match.group(4) is not None:
        return None
    try:
        return datetime.date(*(int(g) for g in match.groups()[:3]))
    except ValueError:
        return None


_EPOCH = datetime.date(1970, 1, 1)


def path_value(text: str, domain: str, *, legacy_name: bool) -> Value:
    """A partition value from its (unescaped) path text; None when the text is not one of the
    domain (a string column's values as numbers, say): SQL's failed cast."""
    if domain == "string":
        return text
    if domain == "number":
        return _number(text)
    if domain == "bool":
        return {"true": True, "false": False}.get(text.lower())
    if domain == "date":
        if legacy_name and re.fullmatch(r"-?\d+", text):  # Java's toString of the epoch day
            return _EPOCH + datetime.timedelta(days=int(text))
        return _date(text)
    return _timestamp(text)


def _literal_value(literal: Literal, domain: str, column: str) -> Value:
    if literal.kind == "null":
        return None
    value: Value
    if literal.kind == "date" and domain == "timestamp":
        day = _date(literal.text)
        value = None if day is None else datetime.datetime.combine(day, datetime.time())
    elif literal.kind in ("date", "timestamp") and domain not in (literal.kind, "string"):
        value = None
    else:
        value = path_value(literal.text, domain, legacy_name=False)
    if value is None:
        raise ConfigError(OPTION, f"{column}: {literal.text!r} is not a {domain} value")
    return value


# ---- binding and matching ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Bound:
    """A comparison of one partition column with typed values (an IN list: several)."""

    column: str
    op: str  # = != < <= > >= in notin isnull notnull
    values: tuple[Value, ...]
    as_number: bool = False  # a string column compared with a number: SQL casts the column


_COMPARE: dict[str, Callable[[int], bool]] = {
    "=": lambda c: c == 0, "!=": lambda c: c != 0, "<": lambda c: c < 0,
    "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0}


def _compare(left: Any, right: Any) -> int:
    """-1, 0 or 1; both of one domain (binding typed the literals as the column)."""
    return int(left > right) - int(left < right)


def _evaluate(node: object, values: Mapping[str, Value]) -> bool | None:
    """SQL's three-valued truth of ``node`` (None: unknown)."""
    if isinstance(node, And):
        left, right = _evaluate(node.left, values), _evaluate(node.right, values)
        return False if left is False or right is False else (
            None if left is None or right is None else True)
    if isinstance(node, Or):
        left, right = _evaluate(node.left, values), _evaluate(node.right, values)
        return True if left is True or right is True else (
            None if left is None or right is None else False)
    if isinstance(node, Not):
        inner = _evaluate(node.operand, values)
        return None if inner is None else not inner
    assert isinstance(node, Bound)
    value = values.get(node.column)
    if node.op in ("isnull", "notnull"):
        return (value is None) == (node.op == "isnull")
    if node.as_number and value is not None:
        value = _number(str(value))
    if value is None:
        return None
    if node.op in ("in", "notin"):
        known = [v for v in node.values if v is not None]
        if any(_compare(value, v) == 0 for v in known):
            return node.op == "in"
        return None if len(known) < len(node.values) else node.op == "notin"
    if node.values[0] is None:
        return None
    return _COMPARE[node.op](_compare(value, node.values[0]))


@dataclass(frozen=True, slots=True)
class PartitionFilter:
    """A ``where`` bound to a table's partition columns: picklable, so a plan may carry it."""

    where: str
    expression: object  # And / Or / Not over Bound
    keys: tuple[str, ...]
    domains: tuple[str, ...]
    default_name: str
    legacy_name: bool

    def matches(self, values: Mapping[str, Value]) -> bool:
        """Whether the partition with these typed values (None: null) is selected."""
        return _evaluate(self.expression, values) is True

    def matches_path(self, partition_text: str) -> bool:
        """Whether the partition at this path (``dt=2024-01-01/hh=10``) is selected."""
        return self.matches(self.values_of_path(partition_text))

    def values_of_path(self, partition_text: str) -> dict[str, Value]:
        from paimond.table.layout import unescape_path_name  # the registry loads this module

        domains = dict(zip(self.keys, self.domains, strict=True))
        values: dict[str, Value] = {}
        for part in partition_text.split("/"):
            key, sep, text = part.partition("=")
            key, text = unescape_path_name(key), unescape_path_name(text)
            if sep and key in domains:
                values[key] = None if text == self.default_name else path_value(
                    text, domains[key], legacy_name=self.legacy_name)
        return values

    def describe(self) -> str:
        return f"where {self.where}"


def _bind(node: Expression, columns: Mapping[str, tuple[str, str]]) -> object:
    """``node`` with each column resolved (``columns``: lower-cased name -> key, domain) and
    its literals typed."""
    if isinstance(node, (And, Or)):
        return type(node)(_bind(node.left, columns), _bind(node.right, columns))  # type: ignore[arg-type]
    if isinstance(node, Not):
        return Not(_bind(node.operand, columns))  # type: ignore[arg-type]
    key, domain = columns[node.column.lower()]
    if isinstance(node, IsNull):
        return Bound(key, "notnull" if node.negated else "isnull", ())
    literals = node.literals if isinstance(node, InList) else (node.literal,)
    as_number = domain == "string" and any(lit.kind == "number" for lit in literals)
    typed = tuple(_literal_value(lit, "number" if as_number else domain, key)
                  for lit in literals)
    if isinstance(node, InList):
        return Bound(key, "notin" if node.negated else "in", typed, as_number)
    return Bound(key, node.op, typed, as_number)


def _columns_of(node: Expression) -> list[str]:
    if isinstance(node, (And, Or)):
        return _columns_of(node.left) + _columns_of(node.right)
    if isinstance(node, Not):
        return _columns_of(node.operand)
    return [node.column]


def partition_filter(where: str, schema: TableSchema, *, table: str = "the table",
                     default_name: str = "__DEFAULT_PARTITION__",
                     legacy_name: bool = True) -> PartitionFilter:
    """``where`` bound to ``schema``'s partition columns (names case-insensitive, as Spark's).
    ConfigError for bad syntax, a column that is not a partition key (Paimon: "Only partition
    predicate is supported"), a partition type without an order here, or a literal that is not
    of its column's type."""
    expression = parse_where(where)
    keys = tuple(schema.partition_keys)
    types = {f.name: f.type for f in schema.fields}
    columns: dict[str, tuple[str, str]] = {}
    for key in keys:
        domain = _domain(types[key])
        if domain is None:
            continue
        columns[key.lower()] = (key, domain)
    for column in _columns_of(expression):
        if column.lower() in columns:
            continue
        if any(k.lower() == column.lower() for k in keys):
            raise ConfigError(OPTION, f"partition column {column} of type {types[column]} "
                                      "cannot be filtered here")
        what = "a partition column" if column in types else "a column"
        raise ConfigError(OPTION, f"only partition columns may be filtered: {column} is not "
                                  f"{what} of {table} (partition keys: {list(keys)})")
    bound = _bind(expression, columns)
    return PartitionFilter(where, bound, keys, tuple(
        columns[k.lower()][1] if k.lower() in columns else "string" for k in keys),
        default_name, legacy_name)


def table_partition_filter(where: str, schema: TableSchema, table: str) -> PartitionFilter:
    """:func:`partition_filter` with the table's partition naming options."""
    from paimond.table.options.core import TableOptions

    naming = TableOptions.of(schema)
    return partition_filter(where, schema, table=table,
                            default_name=naming.partition_default_name,
                            legacy_name=naming.partition_legacy_name)


# what the compaction planners take to select partitions: ``--partition`` K=V pairs, or a filter
PartitionSelection: TypeAlias = Mapping[str, str] | PartitionFilter
