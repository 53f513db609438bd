"""Evaluation of a parsed query (``query.py``) over rows: filters, expressions, grouping.

Null handling and function results follow https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/dyn-query-language.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .errors import QUERY_ERROR, YtError
from .keys import sort_value
from .query import Query
from .yson import Entity, Uint64


def _null(v: Any) -> bool:
    return v is None or isinstance(v, Entity)


def _cmp(op: str, a: Any, b: Any) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        ka = tuple(sort_value(x) for x in (a if isinstance(a, tuple) else (a,)))
        kb = tuple(sort_value(x) for x in (b if isinstance(b, tuple) else (b,)))
    else:
        ka, kb = sort_value(a), sort_value(b)
        if ka[0] in (3, 4) and kb[0] in (3, 4):
            ka, kb = (3, ka[1]), (3, kb[1])  # int64 vs uint64 literals compare numerically
    if op == "=":
        return ka == kb
    if op == "!=":
        return ka != kb
    if op == "<":
        return ka < kb
    if op == "<=":
        return ka <= kb
    if op == ">":
        return ka > kb
    return ka >= kb


def _arith(op: str, a: Any, b: Any) -> Any:
    if _null(a) or _null(b):
        return None
    if isinstance(a, (str, bytes)) or isinstance(b, (str, bytes)):
        raise YtError("Type mismatch in arithmetic expression", QUERY_ERROR)
    unsigned = isinstance(a, Uint64) and isinstance(b, Uint64)
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif op == "/":
        if isinstance(a, float) or isinstance(b, float):
            r = a / b
        else:
            if b == 0:
                raise YtError("Division by zero", QUERY_ERROR)
            r = int(a / b)
    else:
        if b == 0:
            raise YtError("Division by zero", QUERY_ERROR)
        r = a - b * int(a / b)
    if unsigned:
        return Uint64(r % 2**64)
    return r


def _as_text(v: Any) -> Any:
    return v.encode("utf-8") if isinstance(v, str) else v


def _func(name: str, args: list[Any]) -> Any:
    if name == "is_null":
        return _null(args[0])
    if name == "if":
        return args[1] if args[0] else args[2]
    if name == "coalesce":
        for a in args:
            if not _null(a):
                return a
        return None
    if name in ("is_prefix", "is_substr"):
        if _null(args[0]) or _null(args[1]):
            return False
        a, b = _as_text(args[0]), _as_text(args[1])
        return b.startswith(a) if name == "is_prefix" else a in b
    if name in ("lower", "upper"):
        if _null(args[0]):
            return None
        s = args[0]
        return s.lower() if name == "lower" else s.upper()
    if name == "length":
        return None if _null(args[0]) else len(_as_text(args[0]))
    if name == "int64":
        return None if _null(args[0]) else int(args[0])
    if name == "uint64":
        return None if _null(args[0]) else Uint64(int(args[0]) % 2**64)
    if name == "double":
        return None if _null(args[0]) else float(args[0])
    if name == "boolean":
        return None if _null(args[0]) else bool(args[0])
    if name == "string":
        return None if _null(args[0]) else str(args[0])
    raise YtError(f"Unknown function {name!r}", QUERY_ERROR)


def evaluate(
    e: tuple[Any, ...], row: dict[str, Any], columns: Collection[str] | None = None
) -> Any:
    k = e[0]
    if k == "lit":
        return e[1]
    if k == "col":
        name = e[1]
        if columns is not None and name not in columns and name not in row:
            raise YtError(f"Undefined reference {name!r}", QUERY_ERROR)
        v = row.get(name)
        return None if isinstance(v, Entity) else v
    if k == "and":
        return bool(evaluate(e[1], row, columns)) and bool(evaluate(e[2], row, columns))
    if k == "or":
        return bool(evaluate(e[1], row, columns)) or bool(evaluate(e[2], row, columns))
    if k == "not":
        return not evaluate(e[1], row, columns)
    if k == "cmp":
        return _cmp(e[1], evaluate(e[2], row, columns), evaluate(e[3], row, columns))
    if k == "in":
        v = evaluate(e[1], row, columns)
        return any(_cmp("=", v, evaluate(x, row, columns)) for x in e[2])
    if k == "isnull":
        return _null(evaluate(e[1], row, columns))
    if k == "arith":
        return _arith(e[1], evaluate(e[2], row, columns), evaluate(e[3], row, columns))
    if k == "neg":
        v = evaluate(e[1], row, columns)
        return None if _null(v) else -v
    if k == "tuple":
        return tuple(evaluate(x, row, columns) for x in e[1])
    if k == "func":
        return _func(e[1], [evaluate(a, row, columns) for a in e[2]])
    if k == "agg":
        key = agg_key(e)
        if key not in row:
            raise YtError(f"Aggregate function {e[1]} used outside of GROUP BY", QUERY_ERROR)
        return row[key]
    raise YtError(f"Cannot evaluate {k!r}", QUERY_ERROR)


def agg_key(e: tuple[Any, ...]) -> str:
    return "\0agg:" + repr(e)


def _collect_aggs(e: Any, out: list[tuple]) -> None:
    """Append the aggregate calls found in expression ``e`` to ``out``."""
    if isinstance(e, tuple):
        if e and e[0] == "agg":
            out.append(e)
            return
        for x in e[1:]:
            if isinstance(x, tuple):
                _collect_aggs(x, out)
            elif isinstance(x, list):
                for y in x:
                    _collect_aggs(y, out)


def _aggregate(name: str, values: list[Any]) -> Any:
    vals = [v for v in values if not _null(v)]
    if name == "count":
        return len(values)
    if not vals:
        return None
    if name == "sum":
        r = sum(vals)
        return Uint64(r) if isinstance(vals[0], Uint64) else r
    if name == "min":
        return min(vals, key=sort_value)
    if name == "max":
        return max(vals, key=sort_value)
    if name == "avg":
        return float(sum(vals)) / len(vals)
    if name == "first":
        return vals[0]
    raise YtError(f"Unknown aggregate {name!r}", QUERY_ERROR)


def execute(
    q: Query, rows: list[dict[str, Any]], columns: list[str], output_row_limit: int | None = None
) -> list[Any]:
    """Run ``q`` over ``rows`` (dicts); ``columns`` is the ordered list of visible columns."""
    colset = set(columns)
    if q.where is not None:
        rows = [r for r in rows if evaluate(q.where, r, colset)]
    aggs = []
    for e, _ in q.select or []:
        _collect_aggs(e, aggs)
    if q.having is not None:
        _collect_aggs(q.having, aggs)
    for e, _ in q.order_by:
        _collect_aggs(e, aggs)
    if q.group_by is not None or aggs:
        groups = {}
        order = []
        for r in rows:
            gvals = tuple(evaluate(e, r, colset) for e, _ in (q.group_by or []))
            gk = tuple(sort_value(v) for v in gvals)
            if gk not in groups:
                groups[gk] = (gvals, [])
                order.append(gk)
            groups[gk][1].append(r)
        grouped = []
        for gk in order:
            gvals, members = groups[gk]
            g = {}
            for (e, alias), v in zip(q.group_by or [], gvals):
                g[alias] = v
                if e[0] == "col":
                    g[e[1]] = v
            for a in aggs:
                g[agg_key(a)] = _aggregate(
                    a[1], [evaluate(a[2][0], m, colset) if a[2] else 1 for m in members]
                )
            grouped.append(g)
        rows = grouped
        colset = None
        if q.having is not None:
            rows = [r for r in rows if evaluate(q.having, r, None)]
    if q.order_by:
        for e, desc in reversed(q.order_by):
            rows = sorted(rows, key=lambda r, e=e: sort_value(evaluate(e, r, colset)), reverse=desc)
    if q.offset:
        rows = rows[q.offset :]
    if q.limit is not None:
        rows = rows[: q.limit]
    if output_row_limit is not None and len(rows) > output_row_limit:
        rows = rows[:output_row_limit]
    if q.select is None:
        if q.group_by is not None:
            raise YtError("Cannot use * with GROUP BY", QUERY_ERROR)
        return [{c: r.get(c) for c in columns} for r in rows]
    return [{alias: evaluate(e, r, colset) for e, alias in q.select} for r in rows]
