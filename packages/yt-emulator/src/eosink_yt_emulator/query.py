"""A subset of the YT query language for ``select_rows``.

Follows https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/dyn-query-language:

    * | expr [AS alias], ... FROM [//path] [WHERE predicate]
      [GROUP BY expr [AS alias], ...] [HAVING predicate]
      [ORDER BY expr [ASC|DESC], ...] [OFFSET n] [LIMIT n]

Supported: literals (int64, ``123u`` uint64, double, strings in ``"`` or ``'``,
``true``/``false``, ``null``/``#``), column references (``col``, ``[col]``,
``[$tablet_index]``, ``[$row_index]``), ``+ - * / %``, comparisons
``= != <> < <= > >=`` (also on tuples), ``AND``/``OR``/``NOT``, ``IN`` (values or
tuples), ``BETWEEN``, ``IS [NOT] NULL``, functions ``is_null``, ``if``,
``is_prefix``, ``is_substr``, ``lower``, ``upper``, ``length``, ``int64``,
``uint64``, ``double``, ``string``, ``boolean``, ``coalesce``, and aggregates
``sum``, ``min``, ``max``, ``count``, ``avg``, ``first`` with GROUP BY.
Nulls compare as the smallest value (YT's default, ``use_canonical_null_relations``
off).  As in YT, ``ORDER BY`` requires ``LIMIT``.
"""

from __future__ import annotations

import re

from .errors import YtError, QUERY_ERROR
from .schema import sort_value
from .yson import Uint64, Entity

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<path>\[[^\]]*\])
  | (?P<num>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+u?)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<op><=|>=|!=|<>|=|<|>|\+|-|\*|/|%|\(|\)|,|\#)
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$.]*)
""",
    re.VERBOSE,
)

KEYWORDS = {
    "select",
    "from",
    "where",
    "and",
    "or",
    "not",
    "in",
    "between",
    "is",
    "null",
    "as",
    "order",
    "by",
    "asc",
    "desc",
    "limit",
    "offset",
    "group",
    "having",
    "true",
    "false",
    "with",
    "totals",
    "join",
}
AGGREGATES = {"sum", "min", "max", "count", "avg", "first"}


def _err(msg):
    return YtError("Error while parsing query: %s" % msg, QUERY_ERROR)


def tokenize(text):
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise _err("unexpected character %r at position %d" % (text[pos], pos))
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        val = m.group(kind)
        if kind == "ident" and val.lower() in KEYWORDS:
            out.append(("kw", val.lower()))
        else:
            out.append((kind, val))
    out.append(("end", None))
    return out


class Query:
    def __init__(self):
        self.select = None  # None means "*"; else list of (expr, alias)
        self.path = None
        self.where = None
        self.group_by = None
        self.having = None
        self.order_by = []
        self.limit = None
        self.offset = 0


class Parser:
    def __init__(self, text):
        self.toks = tokenize(text)
        self.i = 0

    def peek(self, k=0):
        return self.toks[self.i + k]

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, kind, val=None):
        t = self.peek()
        if t[0] == kind and (val is None or t[1] == val):
            self.i += 1
            return t
        return None

    def expect(self, kind, val=None):
        t = self.accept(kind, val)
        if t is None:
            raise _err("expected %s, found %r" % (val or kind, self.peek()[1]))
        return t

    def parse(self):
        q = Query()
        self.accept("kw", "select")
        if self.accept("op", "*"):
            q.select = None
        else:
            q.select = self.parse_named_list()
        self.expect("kw", "from")
        t = self.expect("path")
        q.path = t[1][1:-1]
        if self.peek()[0] == "kw" and self.peek()[1] == "join":
            raise _err("JOIN is not supported by the emulator")
        if self.accept("kw", "where"):
            q.where = self.parse_expr()
        if self.accept("kw", "group"):
            self.expect("kw", "by")
            q.group_by = self.parse_named_list()
            if self.accept("kw", "with"):
                raise _err("WITH TOTALS is not supported by the emulator")
        if self.accept("kw", "having"):
            q.having = self.parse_expr()
        if self.accept("kw", "order"):
            self.expect("kw", "by")
            while True:
                e = self.parse_expr()
                desc = False
                if self.accept("kw", "desc"):
                    desc = True
                else:
                    self.accept("kw", "asc")
                q.order_by.append((e, desc))
                if not self.accept("op", ","):
                    break
        while True:
            if self.accept("kw", "offset"):
                q.offset = int(self.expect("num")[1].rstrip("u"))
            elif self.accept("kw", "limit"):
                q.limit = int(self.expect("num")[1].rstrip("u"))
            else:
                break
        if self.peek()[0] != "end":
            raise _err("unexpected token %r" % (self.peek()[1],))
        if q.order_by and q.limit is None:
            raise YtError("ORDER BY used without LIMIT", QUERY_ERROR)
        return q

    def parse_named_list(self):
        items = []
        while True:
            e = self.parse_expr()
            alias = None
            if self.accept("kw", "as"):
                alias = self.next()[1]
            items.append((e, alias or expr_name(e)))
            if not self.accept("op", ","):
                return items

    def parse_expr(self):
        return self.parse_or()

    def parse_or(self):
        left = self.parse_and()
        while self.accept("kw", "or"):
            left = ("or", left, self.parse_and())
        return left

    def parse_and(self):
        left = self.parse_not()
        while self.accept("kw", "and"):
            left = ("and", left, self.parse_not())
        return left

    def parse_not(self):
        if self.accept("kw", "not"):
            return ("not", self.parse_not())
        return self.parse_cmp()

    def parse_cmp(self):
        left = self.parse_add()
        t = self.peek()
        if t[0] == "op" and t[1] in ("=", "!=", "<>", "<", "<=", ">", ">="):
            self.next()
            return ("cmp", "!=" if t[1] == "<>" else t[1], left, self.parse_add())
        negate = False
        if t == ("kw", "not") and self.peek(1) in (("kw", "in"), ("kw", "between")):
            self.next()
            negate = True
        if self.accept("kw", "in"):
            self.expect("op", "(")
            values = []
            if not self.accept("op", ")"):
                while True:
                    values.append(self.parse_add())
                    if self.accept("op", ")"):
                        break
                    self.expect("op", ",")
            node = ("in", left, values)
            return ("not", node) if negate else node
        if self.accept("kw", "between"):
            lo = self.parse_add()
            self.expect("kw", "and")
            hi = self.parse_add()
            node = ("and", ("cmp", ">=", left, lo), ("cmp", "<=", left, hi))
            return ("not", node) if negate else node
        if self.accept("kw", "is"):
            neg = bool(self.accept("kw", "not"))
            self.expect("kw", "null")
            node = ("isnull", left)
            return ("not", node) if neg else node
        return left

    def parse_add(self):
        left = self.parse_mul()
        while True:
            t = self.peek()
            if t[0] == "op" and t[1] in ("+", "-"):
                self.next()
                left = ("arith", t[1], left, self.parse_mul())
            else:
                return left

    def parse_mul(self):
        left = self.parse_unary()
        while True:
            t = self.peek()
            if t[0] == "op" and t[1] in ("*", "/", "%"):
                self.next()
                left = ("arith", t[1], left, self.parse_unary())
            else:
                return left

    def parse_unary(self):
        if self.accept("op", "-"):
            return ("neg", self.parse_unary())
        if self.accept("op", "+"):
            return self.parse_unary()
        return self.parse_primary()

    def parse_primary(self):
        t = self.next()
        kind, val = t
        if kind == "num":
            if val.endswith("u"):
                return ("lit", Uint64(int(val[:-1])))
            if any(c in val for c in ".eE"):
                return ("lit", float(val))
            v = int(val)
            return ("lit", Uint64(v) if v >= 2**63 else v)
        if kind == "str":
            body = val[1:-1]
            body = re.sub(
                r"\\(.)",
                lambda m: {"n": "\n", "t": "\t", "r": "\r"}.get(m.group(1), m.group(1)),
                body,
            )
            return ("lit", body)
        if kind == "kw" and val in ("true", "false"):
            return ("lit", val == "true")
        if (kind == "kw" and val == "null") or (kind == "op" and val == "#"):
            return ("lit", None)
        if kind == "path":
            return ("col", val[1:-1])
        if kind == "op" and val == "(":
            items = [self.parse_expr()]
            while self.accept("op", ","):
                items.append(self.parse_expr())
            self.expect("op", ")")
            return items[0] if len(items) == 1 else ("tuple", items)
        if kind == "ident":
            if self.accept("op", "("):
                args = []
                if self.peek() == ("op", "*"):
                    self.next()
                    args = [("lit", 1)]
                elif not self.peek() == ("op", ")"):
                    args.append(self.parse_expr())
                    while self.accept("op", ","):
                        args.append(self.parse_expr())
                self.expect("op", ")")
                name = val.lower()
                if name in AGGREGATES:
                    return ("agg", name, args)
                return ("func", name, args)
            return ("col", val)
        raise _err("unexpected token %r" % (val,))


def expr_name(e):
    if e[0] == "col":
        return e[1]
    if e[0] == "lit":
        return repr(e[1])
    if e[0] == "agg" or e[0] == "func":
        return "%s(%s)" % (e[1], ", ".join(expr_name(a) for a in e[2]))
    return "expr"


def parse_query(text):
    return Parser(text).parse()


# ------------------------------------------------------------------ evaluation


def _null(v):
    return v is None or isinstance(v, Entity)


def _cmp(op, a, b):
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


def _arith(op, a, b):
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


def _as_text(v):
    return v.encode("utf-8") if isinstance(v, str) else v


def _func(name, args):
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
    raise YtError("Unknown function %r" % name, QUERY_ERROR)


def evaluate(e, row, columns=None):
    k = e[0]
    if k == "lit":
        return e[1]
    if k == "col":
        name = e[1]
        if columns is not None and name not in columns and name not in row:
            raise YtError("Undefined reference %r" % name, QUERY_ERROR)
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
            raise YtError("Aggregate function %s used outside of GROUP BY" % e[1], QUERY_ERROR)
        return row[key]
    raise YtError("Cannot evaluate %r" % (k,), QUERY_ERROR)


def agg_key(e):
    return "\0agg:" + repr(e)


def _collect_aggs(e, out):
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


def _aggregate(name, values):
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
    raise YtError("Unknown aggregate %r" % name, QUERY_ERROR)


def execute(q: Query, rows, columns, output_row_limit=None):
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

        def keyf(r):
            return [sort_value(evaluate(e, r, colset)) for e, _ in q.order_by]

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
