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
from typing import Any

from .errors import QUERY_ERROR, YtError
from .yson import Uint64

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


def _err(msg: str) -> YtError:
    return YtError(f"Error while parsing query: {msg}", QUERY_ERROR)


def tokenize(text: str) -> list[tuple[str, str | None]]:
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise _err(f"unexpected character {text[pos]!r} at position {pos}")
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
    def __init__(self) -> None:
        self.select = None  # None means "*"; else list of (expr, alias)
        self.path = None
        self.where = None
        self.group_by = None
        self.having = None
        self.order_by = []
        self.limit = None
        self.offset = 0


class Parser:
    def __init__(self, text: str) -> None:
        self.toks = tokenize(text)
        self.i = 0

    def peek(self, k: int = 0) -> tuple[str, str | None]:
        return self.toks[self.i + k]

    def next(self) -> tuple[str, str | None]:
        t = self.toks[self.i]
        self.i += 1
        return t

    def accept(self, kind: str, val: str | None = None) -> tuple[str, str | None] | None:
        t = self.peek()
        if t[0] == kind and (val is None or t[1] == val):
            self.i += 1
            return t
        return None

    def expect(self, kind: str, val: str | None = None) -> tuple[str, str | None]:
        t = self.accept(kind, val)
        if t is None:
            raise _err(f"expected {val or kind}, found {self.peek()[1]!r}")
        return t

    def parse(self) -> Query:
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
            raise _err(f"unexpected token {self.peek()[1]!r}")
        if q.order_by and q.limit is None:
            raise YtError("ORDER BY used without LIMIT", QUERY_ERROR)
        return q

    def parse_named_list(self) -> list[tuple[tuple[Any, ...], str]]:
        items = []
        while True:
            e = self.parse_expr()
            alias = None
            if self.accept("kw", "as"):
                alias = self.next()[1]
            items.append((e, alias or expr_name(e)))
            if not self.accept("op", ","):
                return items

    def parse_expr(self) -> tuple[Any, ...]:
        return self.parse_or()

    def parse_or(self) -> tuple[Any, ...]:
        left = self.parse_and()
        while self.accept("kw", "or"):
            left = ("or", left, self.parse_and())
        return left

    def parse_and(self) -> tuple[Any, ...]:
        left = self.parse_not()
        while self.accept("kw", "and"):
            left = ("and", left, self.parse_not())
        return left

    def parse_not(self) -> tuple[Any, ...]:
        if self.accept("kw", "not"):
            return ("not", self.parse_not())
        return self.parse_cmp()

    def parse_cmp(self) -> tuple[Any, ...]:
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

    def parse_add(self) -> tuple[Any, ...]:
        left = self.parse_mul()
        while True:
            t = self.peek()
            if t[0] == "op" and t[1] in ("+", "-"):
                self.next()
                left = ("arith", t[1], left, self.parse_mul())
            else:
                return left

    def parse_mul(self) -> tuple[Any, ...]:
        left = self.parse_unary()
        while True:
            t = self.peek()
            if t[0] == "op" and t[1] in ("*", "/", "%"):
                self.next()
                left = ("arith", t[1], left, self.parse_unary())
            else:
                return left

    def parse_unary(self) -> tuple[Any, ...]:
        if self.accept("op", "-"):
            return ("neg", self.parse_unary())
        if self.accept("op", "+"):
            return self.parse_unary()
        return self.parse_primary()

    def parse_primary(self) -> tuple[Any, ...]:
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
        raise _err(f"unexpected token {val!r}")


def expr_name(e: tuple[Any, ...]) -> str:
    if e[0] == "col":
        return e[1]
    if e[0] == "lit":
        return repr(e[1])
    if e[0] == "agg" or e[0] == "func":
        return f"{e[1]}({', '.join(expr_name(a) for a in e[2])})"
    return "expr"


def parse_query(text: str) -> Query:
    return Parser(text).parse()
