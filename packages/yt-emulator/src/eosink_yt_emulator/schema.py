"""Table schemas: parsing, validation of rows, key comparison.

Follows https://ytsaurus.tech/docs/en/user-guide/storage/static-schema (``strict``,
``unique_keys``, ``sort_order``, ``required``, ``type`` / ``type_v3``, schema_mode
weak/strong) and https://ytsaurus.tech/docs/en/user-guide/storage/data-types
(integer ranges, ``utf8``, ``any``/``yson``).  Value comparison follows the YT
order of value types: null < int64 < uint64 < double < boolean < string < any.
Integral conversions int64 <-> uint64 are accepted when the value fits (the
default ``enable_integral_type_conversion`` of the table writer); an integer is
not accepted for a ``double`` column (stricter side).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .errors import SCHEMA_VIOLATION, YtError
from .yson import Attributed, Entity, Uint64, unwrap

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "interval": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "date": (0, 49673 - 1),
    "datetime": (0, 49673 * 86400 - 1),
    "timestamp": (0, 49673 * 86400 * 10**6 - 1),
}
UNSIGNED = {"uint8", "uint16", "uint32", "uint64", "date", "datetime", "timestamp"}
SIMPLE_TYPES = set(INT_RANGES) | {
    "double",
    "float",
    "boolean",
    "string",
    "utf8",
    "any",
    "yson",
    "null",
    "void",
    "json",
    "uuid",
}
V3_TO_V1 = {"yson": "any", "bool": "boolean"}
V1_TO_V3 = {"any": "yson", "boolean": "bool"}
AGGREGATES = {"sum", "min", "max", "first"}


def _s(v: Any) -> Any:
    v = unwrap(v)[0]
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


class Column:
    __slots__ = (
        "name",
        "type",
        "required",
        "sort_order",
        "aggregate",
        "expression",
        "lock",
        "type_v3",
        "group",
    )

    def __init__(
        self,
        name: str,
        type_: str,
        required: bool = False,
        sort_order: str | None = None,
        aggregate: str | None = None,
        expression: str | None = None,
        lock: str | None = None,
        type_v3: Any = None,
        group: str | None = None,
    ) -> None:
        self.name = name
        self.type = type_
        self.required = required
        self.sort_order = sort_order
        self.aggregate = aggregate
        self.expression = expression
        self.lock = lock
        self.type_v3 = type_v3
        self.group = group

    def to_yson(self) -> dict[str, Any]:
        out = {"name": self.name, "type": self.type, "required": self.required}
        if self.type_v3 is not None:
            out["type_v3"] = self.type_v3
        else:
            t3 = V1_TO_V3.get(self.type, self.type)
            out["type_v3"] = t3 if self.required else {"type_name": "optional", "item": t3}
        if self.sort_order:
            out["sort_order"] = self.sort_order
        if self.aggregate:
            out["aggregate"] = self.aggregate
        if self.expression:
            out["expression"] = self.expression
        if self.lock:
            out["lock"] = self.lock
        if self.group:
            out["group"] = self.group
        return out


def _parse_type_v3(t: Any) -> tuple[str, bool]:
    """Return (v1 type, required) for a type_v3 description."""
    t = unwrap(t)[0]
    if isinstance(t, (str, bytes)):
        name = _s(t)
        return V3_TO_V1.get(name, name), True
    if isinstance(t, dict):
        name = _s(t.get("type_name"))
        if name == "optional":
            inner, inner_req = _parse_type_v3(t.get("item"))
            if not inner_req:
                return "any", False  # optional<optional<T>> is composite
            return inner, False
        if name == "tagged":
            return _parse_type_v3(t.get("item"))
        if name == "decimal":
            return "string", True
        return "any", True  # list/struct/tuple/dict/variant: composite
    raise YtError(f"Invalid type_v3 {t!r}", SCHEMA_VIOLATION)


class Schema:
    def __init__(
        self, columns: list[Column], strict: bool = True, unique_keys: bool = False
    ) -> None:
        self.columns = columns
        self.strict = strict
        self.unique_keys = unique_keys
        self.by_name = {c.name: c for c in columns}
        self.key_columns = [c.name for c in columns if c.sort_order]

    @property
    def sorted(self) -> bool:
        return bool(self.key_columns)

    def is_empty(self) -> bool:
        return not self.columns

    @classmethod
    def empty_weak(cls) -> Schema:
        return cls([], strict=False, unique_keys=False)

    @classmethod
    def parse(cls, value: Any) -> Schema:
        value, attrs = unwrap(value)
        if isinstance(value, Schema):
            return value
        if not isinstance(value, list):
            raise YtError(
                "Error parsing table schema: expected a list of columns", SCHEMA_VIOLATION
            )
        strict = attrs.get("strict", True)
        unique_keys = attrs.get("unique_keys", False)
        columns = []
        seen = set()
        for raw in value:
            columns.append(_parse_column(raw, seen))
        key_done = False
        for c in columns:
            if c.sort_order:
                if key_done:
                    raise YtError(
                        f"Key columns must form a prefix of the schema (column {c.name!r})",
                        SCHEMA_VIOLATION,
                    )
            else:
                key_done = True
        if unique_keys and not any(c.sort_order for c in columns):
            raise YtError("Non-sorted schema cannot have unique keys", SCHEMA_VIOLATION)
        return cls(columns, strict=bool(strict), unique_keys=bool(unique_keys))

    def to_yson(self) -> Attributed:
        return Attributed(
            [c.to_yson() for c in self.columns],
            {"strict": self.strict, "unique_keys": self.unique_keys},
        )

    def with_sort(self, sort_by: list[str], unique_keys: bool = False) -> Schema:
        """The schema sorted by ``sort_by`` (key columns moved to the front)."""
        cols = []
        for name in sort_by:
            c = self.by_name.get(name)
            if c is None:
                if self.strict:
                    raise YtError(
                        f"Sort column {name!r} is not found in the schema", SCHEMA_VIOLATION
                    )
                c = Column(name, "any", False)
            cols.append(
                Column(
                    c.name, c.type, c.required, "ascending", None, c.expression, c.lock, c.type_v3
                )
            )
        for c in self.columns:
            if c.name not in sort_by:
                cols.append(
                    Column(
                        c.name,
                        c.type,
                        c.required,
                        None,
                        c.aggregate,
                        c.expression,
                        c.lock,
                        c.type_v3,
                    )
                )
        return Schema(cols, strict=self.strict, unique_keys=unique_keys)

    def without_sort(self) -> Schema:
        return Schema(
            [
                Column(
                    c.name, c.type, c.required, None, c.aggregate, c.expression, c.lock, c.type_v3
                )
                for c in self.columns
            ],
            strict=self.strict,
            unique_keys=False,
        )

    def same_columns(self, other: Schema) -> bool:
        return [c.to_yson() for c in self.without_sort().columns] == [
            c.to_yson() for c in other.without_sort().columns
        ] and self.strict == other.strict

    # ---------------------------------------------------------- validation

    def validate_row(
        self, row: dict[str, Any], path: str = "", allow_system: Collection[str] = ()
    ) -> dict[str, Any]:
        """Check and normalize one row against the schema; returns the row to store."""
        row = unwrap(row)[0]
        if not isinstance(row, dict):
            raise YtError(
                f"Invalid row: expected a map, got {type(row).__name__}",
                SCHEMA_VIOLATION,
                {"path": path},
            )
        out = {}
        for k, v in row.items():
            if isinstance(v, Entity):
                v = None
            col = self.by_name.get(k)
            if col is None:
                if k in allow_system:
                    out[k] = v
                    continue
                if k.startswith("$"):
                    raise YtError(f"Unknown system column {k!r}", SCHEMA_VIOLATION, {"path": path})
                if self.strict:
                    raise YtError(
                        f"Column {k!r} does not belong to the strict schema of table {path}",
                        SCHEMA_VIOLATION,
                        {"path": path, "column": k},
                    )
                out[k] = v
                continue
            out[k] = check_value(v, col, path)
        for col in self.columns:
            if col.required and out.get(col.name) is None:
                raise YtError(
                    f"Required column {col.name!r} cannot have null value",
                    SCHEMA_VIOLATION,
                    {"path": path, "column": col.name},
                )
        return out


def check_value(v: Any, col: Column, path: str = "") -> Any:
    if isinstance(v, Entity):
        v = None
    if v is None:
        return None
    t = col.type
    bad = False
    if t in INT_RANGES:
        if isinstance(v, bool) or not isinstance(v, int):
            bad = True
        else:
            lo, hi = INT_RANGES[t]
            if not lo <= int(v) <= hi:
                raise YtError(
                    f"Value {int(v)} is out of range for column {col.name!r} of type {t!r}",
                    SCHEMA_VIOLATION,
                    {"path": path, "column": col.name},
                )
            v = Uint64(int(v)) if t in UNSIGNED else int(v)
    elif t in ("double", "float"):
        if not isinstance(v, float):
            bad = True
    elif t == "boolean":
        if not isinstance(v, bool):
            bad = True
    elif t == "string":
        if not isinstance(v, (str, bytes)):
            bad = True
    elif t == "utf8" or t == "json" or t == "uuid":
        if isinstance(v, bytes):
            try:
                v = v.decode("utf-8")
            except UnicodeDecodeError:
                raise YtError(
                    f"Value of column {col.name!r} is not a valid UTF-8 string",
                    SCHEMA_VIOLATION,
                    {"path": path, "column": col.name},
                )
        elif not isinstance(v, str):
            bad = True
    elif t in ("null", "void"):
        bad = True
    if bad:
        raise YtError(
            f"Invalid type of column {col.name!r}: expected {t!r}, got {value_type(v)!r}",
            SCHEMA_VIOLATION,
            {"path": path, "column": col.name, "expected_type": t, "actual_type": value_type(v)},
        )
    return v


def value_type(v: Any) -> str:
    v = unwrap(v)[0]
    if v is None or isinstance(v, Entity):
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, Uint64):
        return "uint64"
    if isinstance(v, int):
        return "int64"
    if isinstance(v, float):
        return "double"
    if isinstance(v, (str, bytes)):
        return "string"
    return "any"


def _parse_column(raw: Any, seen: set[str]) -> Column:
    """One column of a schema in YSON, checked as YT checks it (``seen``: the names so far)."""
    raw = unwrap(raw)[0]
    if not isinstance(raw, dict) or "name" not in raw:
        raise YtError(
            'Error parsing table schema: each column must be a map with "name"',
            SCHEMA_VIOLATION,
        )
    name = _s(raw["name"])
    if name in seen:
        raise YtError(f"Duplicate column name {name!r} in table schema", SCHEMA_VIOLATION)
    seen.add(name)
    type_v3 = raw.get("type_v3")
    if "type" in raw:
        t = _s(raw["type"])
        required = bool(raw.get("required", False))
        if type_v3 is not None:
            t3, req3 = _parse_type_v3(type_v3)
            if "required" not in raw:
                required = req3
    elif type_v3 is not None:
        t, required = _parse_type_v3(type_v3)
    else:
        raise YtError(f'Column {name!r} has neither "type" nor "type_v3"', SCHEMA_VIOLATION)
    t = V3_TO_V1.get(t, t)
    if t not in SIMPLE_TYPES:
        raise YtError(f"Invalid type {t!r} of column {name!r}", SCHEMA_VIOLATION)
    if t == "any" and required and type_v3 is None:
        raise YtError('Column of type "any" cannot be "required"', SCHEMA_VIOLATION)
    sort_order = _s(raw.get("sort_order")) if raw.get("sort_order") is not None else None
    if sort_order not in (None, "ascending", "descending"):
        raise YtError(f"Invalid sort_order {sort_order!r} of column {name!r}", SCHEMA_VIOLATION)
    aggregate = _s(raw.get("aggregate")) if raw.get("aggregate") is not None else None
    if aggregate is not None and aggregate not in AGGREGATES:
        raise YtError(f"Unknown aggregate function {aggregate!r}", SCHEMA_VIOLATION)
    if aggregate is not None and sort_order:
        raise YtError(f"Key column {name!r} cannot be aggregated", SCHEMA_VIOLATION)
    keep_v3 = (
        type_v3
        if (type_v3 is not None and t == "any" and not isinstance(unwrap(type_v3)[0], str))
        else None
    )
    return Column(
        name,
        t,
        required,
        sort_order,
        aggregate,
        _s(raw.get("expression")) if raw.get("expression") else None,
        _s(raw.get("lock")) if raw.get("lock") else None,
        keep_v3,
        _s(raw.get("group")) if raw.get("group") else None,
    )
