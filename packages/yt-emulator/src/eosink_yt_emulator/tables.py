"""Static tables: write_table, read_table, concatenate.

Follows https://ytsaurus.tech/docs/en/user-guide/storage/static-tables and
https://ytsaurus.tech/docs/en/user-guide/storage/static-schema: strict schemas are
enforced on write (error 307), a sorted schema requires sorted input (error 301) and,
with ``unique_keys``, no duplicates (306); ``<append=%true>`` takes a ``shared`` lock,
overwrite an ``exclusive`` lock (https://ytsaurus.tech/docs/en/user-guide/storage/transactions#implicit_locks);
every write call produces one chunk.  A table is its list of chunks: appending, concatenating,
counting rows and reading a range by row index cost O(chunks + rows touched), never
O(table), as on a real cluster (a sorted append compares with the last row only).
A chunk is a list of rows or a :class:`GeneratedChunk` (its row count and a function
of the row index: metadata instead of rows, so that tests and benchmarks can hold
tables of millions of rows).  Reading follows
https://ytsaurus.tech/docs/en/user-guide/storage/ypath (``ranges`` with
``lower_limit``/``upper_limit``/``exact`` by ``row_index`` or ``key``, ``columns``)
and https://ytsaurus.tech/docs/en/user-guide/storage/io-configuration (control
attributes ``enable_row_index``/``enable_range_index``/``enable_tablet_index``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import SORT_ORDER_VIOLATION, YtError
from .keys import check_sorted, key_of, sort_value
from .schema import Schema
from .yson import Attributed, Entity, unwrap

if TYPE_CHECKING:
    from .cypress import Cypress
    from .nodes import Node, NodeState
    from .state import EmulatorState


def table_schema(state: NodeState) -> Schema:
    """The schema attribute of a static table's state (a weak empty one if unset)."""
    s = state.attrs.get("schema")
    return s if isinstance(s, Schema) else Schema.empty_weak()


def row_count(state: NodeState) -> int:
    """Rows of a static table's state, counted from its chunks without reading them."""
    return sum(len(c) for c in state.chunks)


class GeneratedChunk(Sequence):
    """A chunk held as metadata: a row count and ``make_row(index)``, called only for the
    rows that are read (see :meth:`eosink_yt_emulator.YtEmulator.add_generated_rows`)."""

    def __init__(self, count: int, make_row: Callable[[int], dict[str, Any]]) -> None:
        self.count = int(count)
        self.make_row = make_row

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            return [self.make_row(i) for i in range(*index.indices(self.count))]
        if index < 0:
            index += self.count
        if not 0 <= index < self.count:
            raise IndexError(index)
        return self.make_row(index)


class TableRows(Sequence):
    """The rows of a chunk list, addressed by row index without copying the chunks:
    ``len`` and ``rows[i]`` cost O(log chunks), ``rows[i:j]`` O(chunks + j - i)."""

    def __init__(self, chunks: list[Any]) -> None:
        self.chunks = [c for c in chunks if len(c)]
        self.starts = []
        total = 0
        for chunk in self.chunks:
            self.starts.append(total)
            total += len(chunk)
        self.total = total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(index, slice):
            lo, hi, step = index.indices(self.total)
            if step != 1:
                return [self[i] for i in range(lo, hi, step)]
            out = []
            for start, chunk in zip(self.starts, self.chunks):
                end = start + len(chunk)
                if end <= lo or start >= hi:
                    continue
                out.extend(chunk[max(lo, start) - start : min(hi, end) - start])
            return out
        if index < 0:
            index += self.total
        if not 0 <= index < self.total:
            raise IndexError(index)
        at = bisect.bisect_right(self.starts, index) - 1
        return self.chunks[at][index - self.starts[at]]


def last_row(chunks: list[Any]) -> dict[str, Any] | None:
    """The last row of a chunk list (O(chunks)), ``None`` when it holds none."""
    for chunk in reversed(chunks):
        if len(chunk):
            return chunk[len(chunk) - 1]
    return None


def path_attrs(path: Any) -> dict[str, Any]:
    """The attributes of a rich YPath (``append``, ``sorted_by``, ranges, ...)."""
    return unwrap(path)[1]


class StaticTables:
    def __init__(self, state: EmulatorState) -> None:
        self.state = state

    @property
    def cypress(self) -> Cypress:
        """The emulator's Cypress."""
        return self.state.cypress

    def require_table(self, path: Any, tx: str | None) -> tuple[Node, str]:
        """The table at ``path``; another node type fails."""
        node, _, _, text = self.cypress.resolve(path, tx)
        if node.type != "table":
            raise YtError(f"Node {text} is not a table (type {node.type!r})", 1, {"path": text})
        return node, text

    # ---------------------------------------------------------------- write

    def write(
        self, params: dict[str, Any], rows: list[dict[str, Any]], tx: str | None
    ) -> dict[str, Any]:
        """``write_table``: replace or append rows, checking schema and sort order."""
        path = params["path"]
        node, text = self.require_table(path, tx)
        attrs = path_attrs(path)
        if node.dyn is not None:
            raise YtError(
                f"Cannot write into dynamic table {text} with write_table", 1, {"path": text}
            )
        append = bool(attrs.get("append", False))
        self.write_rows(node, text, [rows], tx, append, attrs.get("sorted_by"), attrs.get("schema"))
        return {}

    def write_rows(
        self,
        node: Node,
        text: str,
        chunks_in: Iterable[Iterable[dict[str, Any]]],
        tx: str | None,
        append: bool,
        sorted_by: list[str] | None = None,
        new_schema: Any = None,
        take_lock: bool = True,
    ) -> None:
        st = self.cypress.view(node, tx)
        schema = table_schema(st)
        schema_mode = st.attrs.get("schema_mode", "weak")
        new_attrs = {}
        if new_schema is not None:
            if append:
                raise YtError(
                    f"Cannot set schema while appending to table {text}", 1, {"path": text}
                )
            schema = Schema.parse(new_schema)
            schema_mode = "strong"
            new_attrs["schema"] = schema
            new_attrs["schema_mode"] = "strong"
        if sorted_by is not None:
            sorted_by = [unwrap(c)[0] for c in sorted_by]
            if append and schema.key_columns != sorted_by:
                if not (schema.sorted and schema.key_columns[: len(sorted_by)] == sorted_by):
                    raise YtError(
                        f"Cannot append sorted data to table {text}: sorted_by {sorted_by!r} does "
                        "not match key "
                        f"columns {schema.key_columns!r}",
                        SORT_ORDER_VIOLATION,
                        {"path": text},
                    )
            elif not append:
                schema = schema.with_sort(
                    sorted_by, unique_keys=schema.unique_keys and schema.key_columns == sorted_by
                )
                new_attrs["schema"] = schema
        elif not append and schema_mode == "weak" and schema.sorted:
            schema = Schema.empty_weak()
            new_attrs["schema"] = schema
        chunks = [[schema.validate_row(r, text) for r in c] for c in chunks_in]
        chunks = [c for c in chunks if c]
        validated = [r for c in chunks for r in c]
        if schema.sorted:
            prev = None
            if append:
                last = last_row(st.chunks)
                if last is not None:
                    prev = key_of(last, schema.key_columns)
            check_sorted(validated, schema.key_columns, schema.unique_keys, text, prev)
        mode = "append" if append else "replace"
        lock_mode = ("shared" if append else "exclusive") if take_lock else None
        self.cypress.write_state(
            node, tx, attrs=new_attrs or None, chunks=chunks, chunks_mode=mode, lock_mode=lock_mode
        )

    def add_generated_rows(
        self, path: Any, count: int, make_row: Callable[[int], dict[str, Any]]
    ) -> None:
        """Append ``count`` rows, ``make_row(i)`` for i in 0..count-1, as one generated chunk
        outside any transaction. Only the first and last rows are checked against the schema
        (and, for a sorted table, against the table's last key): the rows are never stored."""
        node, text = self.require_table(path, None)
        if node.dyn is not None:
            raise YtError(f"Cannot add rows to dynamic table {text}", 1, {"path": text})
        st = self.cypress.view(node, None)
        schema = table_schema(st)
        edges = [schema.validate_row(make_row(i), text) for i in sorted({0, count - 1})]
        if schema.sorted:
            last = last_row(st.chunks)
            prev = key_of(last, schema.key_columns) if last is not None else None
            check_sorted(edges, schema.key_columns, schema.unique_keys, text, prev)
        self.cypress.write_state(
            node,
            None,
            chunks=[GeneratedChunk(count, make_row)],
            chunks_mode="append",
            lock_mode="shared",
        )

    # ---------------------------------------------------------------- read

    def read(self, params: dict[str, Any], tx: str | None) -> tuple[list[Any], dict[str, Any]]:
        """``read_table``: the rows of the ranges asked, and the response parameters."""
        path = params["path"]
        node, text = self.require_table(path, tx)
        attrs = path_attrs(path)
        control = params.get("control_attributes") or {}
        columns = attrs.get("columns")
        if node.dyn is not None:
            rows, schema = self._dynamic_rows(node, params, text)
            tablet_rows = rows
        else:
            st = self.cypress.view(node, tx)
            rows = TableRows(st.chunks)
            schema = table_schema(st)
            tablet_rows = None
        ranges = attrs.get("ranges")
        if ranges is None:
            legacy = {k: attrs[k] for k in ("lower_limit", "upper_limit", "exact") if k in attrs}
            ranges = [legacy] if legacy else [{}]
        out = []
        total = 0
        start_row_index = None
        for range_index, rng in enumerate(ranges):
            lo, hi = self._range_bounds(rng, rows, schema, text)
            if start_row_index is None:
                start_row_index = lo
            selected = rows[lo:hi]
            total += len(selected)
            # YT writes range and row indexes as separate control rows, range index first.
            if control.get("enable_range_index") and (selected or range_index == 0):
                out.append(Attributed(Entity(), {"range_index": range_index}))
            if control.get("enable_row_index") and selected:
                out.append(Attributed(Entity(), {"row_index": lo}))
            for i, row in enumerate(selected):
                if (
                    tablet_rows is not None
                    and control.get("enable_tablet_index")
                    and "$tablet_index" in row
                ):
                    out.append(Attributed(Entity(), {"tablet_index": row["$tablet_index"]}))
                if columns is not None:
                    row = {c: row[c] for c in columns if c in row}
                elif tablet_rows is not None:
                    row = {k: v for k, v in row.items() if not k.startswith("$")}
                out.append(row)
        response_params = {"start_row_index": start_row_index or 0, "approximate_row_count": total}
        return out, response_params

    def _dynamic_rows(
        self, node: Node, params: dict[str, Any], text: str
    ) -> tuple[list[dict[str, Any]], Schema]:
        """The rows of a dynamic table read by ``read_table`` (as of the newest timestamp)."""
        dyn = node.dyn
        ts = self.state.dynamic.read_ts({"timestamp": unwrap(params["path"])[1].get("timestamp")})
        if dyn.sorted:
            return list(dyn.scan(ts)), dyn.schema
        return list(dyn.ordered_rows()), dyn.schema

    def _range_bounds(
        self, rng: dict[str, Any], rows: Sequence[dict[str, Any]], schema: Schema, text: str
    ) -> tuple[int, int]:
        """Row indexes ``[lo, hi)`` of one range of a read."""
        n = len(rows)
        rng = unwrap(rng)[0] or {}
        if "exact" in rng:
            ex = rng["exact"]
            if "row_index" in ex:
                i = int(ex["row_index"])
                return max(0, min(i, n)), max(0, min(i + 1, n))
            if "key" in ex:
                lo = self._key_bound(ex["key"], rows, schema, text, upper=False)
                hi = self._key_bound(ex["key"], rows, schema, text, upper=True)
                return lo, hi
            raise YtError(f"Unsupported exact limit {ex!r}", 1)
        lo, hi = 0, n
        if "lower_limit" in rng:
            lo = self._limit(rng["lower_limit"], rows, schema, text, upper=False)
        if "upper_limit" in rng:
            hi = self._limit(rng["upper_limit"], rows, schema, text, upper=True)
        return lo, max(lo, hi)

    def _limit(
        self,
        limit: dict[str, Any],
        rows: Sequence[dict[str, Any]],
        schema: Schema,
        text: str,
        upper: bool,
    ) -> int:
        """The row index of one limit (row index or key) of a range."""
        limit = unwrap(limit)[0]
        n = len(rows)
        result_lo, result_hi = 0, n
        if "row_index" in limit:
            i = max(0, min(int(limit["row_index"]), n))
            if upper:
                result_hi = i
            else:
                result_lo = i
        if "key" in limit:
            b = self._key_bound(limit["key"], rows, schema, text, upper=False)
            if upper:
                result_hi = min(result_hi, b)
            else:
                result_lo = max(result_lo, b)
        if "key_bound" in limit:
            kb = unwrap(limit["key_bound"])[0]
            rel, key = kb[0], kb[1]
            inclusive_upper = rel in ("<=", ">")
            b = self._key_bound(key, rows, schema, text, upper=inclusive_upper)
            if upper:
                result_hi = min(result_hi, b)
            else:
                result_lo = max(result_lo, b)
        return result_hi if upper else result_lo

    def _key_bound(
        self, key: Any, rows: Sequence[dict[str, Any]], schema: Schema, text: str, upper: bool
    ) -> int:
        """The first row index at or past ``key`` in sorted ``rows``."""
        if not schema.sorted:
            raise YtError(f"Cannot use key limits on unsorted table {text}", 1, {"path": text})
        key = [None if isinstance(k, Entity) else k for k in unwrap(key)[0]]
        kc = schema.key_columns[: len(key)]
        target = tuple(sort_value(k) for k in key)
        # The first row whose key is above (upper) or at least (lower) the bound: a binary
        # search, the rows being sorted.
        lo, hi = 0, len(rows)
        while lo < hi:
            mid = (lo + hi) // 2
            rk = key_of(rows[mid], kc)
            if (rk > target) if upper else (rk >= target):
                hi = mid
            else:
                lo = mid + 1
        return lo

    # ---------------------------------------------------------------- concatenate

    def concatenate(self, params: dict[str, Any], tx: str | None) -> dict[str, Any]:
        """``concatenate``: the source tables' rows, in order, into the destination."""
        dst = params["destination_path"]
        dst_node, dst_text = self.require_table(dst, tx)
        append = bool(path_attrs(dst).get("append", False))
        chunks = []
        for src in params["source_paths"]:
            node, text = self.require_table(src, tx)
            st = self.cypress.view(node, tx)
            chunks.extend(st.chunks)
        rows = [r for c in chunks for r in c]
        dst_schema = table_schema(self.cypress.view(dst_node, tx))
        if dst_schema.sorted:
            # Concatenation does not keep sortedness unless the result happens to be sorted; YT
            # requires the destination to be unsorted unless sources are sorted and ordered.
            check_sorted(rows, dst_schema.key_columns, dst_schema.unique_keys, dst_text)
        self.write_rows(dst_node, dst_text, chunks, tx, append)
        return {}
