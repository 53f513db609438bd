"""The data of one dynamic table: its tablets, its sorted store (MVCC versions per key), its rows.

Stores live outside master transactions, as in YT; the commands on them are in ``dynamic.py``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .errors import (
    INVALID_TABLET_STATE,
    NO_SUCH_TABLET,
    SCHEMA_VIOLATION,
    TABLET_NOT_MOUNTED,
    YtError,
)
from .keys import key_of
from .schema import Schema, check_value
from .sortedkeys import SortedKeys
from .yson import Entity, Uint64

if TYPE_CHECKING:
    from .nodes import Node

TRANSIENT = {"mounting", "unmounting", "freezing", "unfreezing"}
SYNC_LAST_COMMITTED = 0x3FFFFFFFFFFFFF01
ASYNC_LAST_COMMITTED = 0x3FFFFFFFFFFFFF04
MAX_TS = 0x3FFFFFFFFFFFFF00


class Tablet:
    def __init__(self, index: int) -> None:
        self.index = index
        self.state = "unmounted"
        self.target = None
        self.transition_end = 0.0
        # ordered tables
        self.rows = []  # list of dicts (data columns + "$timestamp")
        self.trimmed = 0
        self.last_write_ts = 0

    def current(self) -> str:
        """The tablet's state, finishing a transition whose delay has passed."""
        if self.target is not None and time.time() >= self.transition_end:
            self.state = self.target
            self.target = None
        return self.state

    def transition(self, transient: str, final: str, delay: float) -> None:
        """Enter ``transient`` for ``delay`` seconds, then ``final`` (at once if no delay)."""
        if delay <= 0:
            self.state, self.target = final, None
        else:
            self.state, self.target = transient, final
            self.transition_end = time.time() + delay

    @property
    def total(self) -> int:
        """Rows ever written to the tablet, trimmed ones included (the next ``$row_index``)."""
        return self.trimmed + len(self.rows)


class DynTable:
    """Non-transactional data of a dynamic table (stores live outside master transactions)."""

    def __init__(
        self,
        node: Node,
        schema: Schema,
        tablet_count: int = 1,
        atomicity: str = "full",
        commit_ordering: str = "weak",
    ) -> None:
        self.node = node
        self.schema = schema
        self.sorted = schema.sorted
        self.key_columns = list(schema.key_columns)
        self.atomicity = atomicity
        self.commit_ordering = commit_ordering
        self.tablets = [Tablet(i) for i in range(max(1, int(tablet_count)))]
        # sorted tables: key -> list of (commit_ts, row or None) in ts order
        self.store = {}
        self.sorted_keys = SortedKeys()  # the keys (sort tuples) in order
        self.key_values = {}  # sort tuple -> original key values
        self.last_commit_ts = 0
        #: Keys whose newest version is a row (not a deletion): ``@row_count`` without a scan,
        #: as YT keeps it (a ``get`` of any attribute computes them all).
        self.live_rows = 0

    def clone_for(self, node: Node) -> DynTable:
        """A copy of this table's data for ``node`` (``copy`` of a frozen or unmounted table)."""
        c = DynTable(node, self.schema, len(self.tablets), self.atomicity, self.commit_ordering)
        c.store = {k: list(v) for k, v in self.store.items()}
        c.sorted_keys = self.sorted_keys.copy()
        c.key_values = dict(self.key_values)
        c.live_rows = self.live_rows
        for t, src in zip(c.tablets, self.tablets):
            t.rows = list(src.rows)
            t.trimmed = src.trimmed
        return c

    # ---------------------------------------------------------------- tablet state

    def states(self) -> list[Any]:
        """The current state of each tablet."""
        return [t.current() for t in self.tablets]

    def table_state(self) -> str:
        """``@tablet_state``: the tablets' common state, ``transient`` or ``mixed``."""
        states = self.states()
        if any(s in TRANSIENT for s in states):
            return "transient"
        if len(set(states)) == 1:
            return states[0]
        return "mixed"

    def any_not_unmounted(self) -> bool:
        """Whether some tablet is not unmounted (then the schema cannot change)."""
        return any(s != "unmounted" for s in self.states())

    def tablets_attr(self) -> list[dict[str, Any]]:
        """``@tablets``: one map per tablet, as YT lists them."""
        out = []
        for t in self.tablets:
            item = {
                "index": t.index,
                "tablet_id": f"{self.node.id}-t{t.index}",
                "state": t.current(),
                "cell_id": "1-1-1-1",
            }
            if not self.sorted:
                item["trimmed_row_count"] = t.trimmed
                item["flushed_row_count"] = t.total
            out.append(item)
        return out

    def tablet_range(self, first: int | None, last: int | None) -> list[Tablet]:
        """Tablet indexes of a ``first_tablet_index``/``last_tablet_index`` request."""
        n = len(self.tablets)
        first = 0 if first is None else int(first)
        last = n - 1 if last is None else int(last)
        if not (0 <= first <= last < n):
            raise YtError(
                f"Invalid tablet range [{first}, {last}] for a table with {n} tablets",
                NO_SUCH_TABLET,
            )
        return self.tablets[first : last + 1]

    def require_readable(self, path: str) -> None:
        """Fail as YT does if some tablet cannot serve reads."""
        for t in self.tablets:
            s = t.current()
            if s not in ("mounted", "frozen", "freezing", "unfreezing"):
                raise YtError(
                    f"Cannot read from table {path} since tablet {t.index} is in {s!r} state",
                    TABLET_NOT_MOUNTED,
                    {"path": path, "tablet_state": s},
                )

    def require_writable(self, path: str, tablets: list[Tablet] | None = None) -> None:
        """Fail as YT does if some of ``tablets`` cannot take writes."""
        for t in tablets if tablets is not None else self.tablets:
            s = t.current()
            if s != "mounted":
                code = (
                    TABLET_NOT_MOUNTED
                    if s in ("unmounted", "unmounting", "mounting")
                    else INVALID_TABLET_STATE
                )
                raise YtError(
                    f"Cannot write into tablet {t.index} of table {path} since it is in {s!r} "
                    "state",
                    code,
                    {"path": path, "tablet_state": s},
                )

    # ---------------------------------------------------------------- sorted reads

    def latest(self, skey: tuple, ts: int) -> dict[str, Any] | None:
        """The row at ``skey`` as of timestamp ``ts`` (``None`` if absent or deleted)."""
        versions = self.store.get(skey)
        if not versions:
            return None
        for cts, row in reversed(versions):
            if cts <= ts:
                if row is None:
                    return None
                # Columns added by alter_table read as null in older rows.
                return {c.name: row.get(c.name) for c in self.schema.columns}
        return None

    def scan(self, ts: int) -> Iterator[Any]:
        """The table's rows as of timestamp ``ts``, in key order."""
        for skey in self.sorted_keys:
            row = self.latest(skey, ts)
            if row is not None:
                yield row

    def ordered_rows(self) -> Iterator[Any]:
        """An ordered table's rows with ``$tablet_index`` and ``$row_index``."""
        for t in self.tablets:
            for i, row in enumerate(t.rows):
                out = {"$tablet_index": t.index, "$row_index": t.trimmed + i}
                out.update(row)
                yield out

    # ---------------------------------------------------------------- writes

    def normalize_write(
        self, row: dict[str, Any], op: str, path: str, update: bool = False
    ) -> dict[str, Any]:
        """Validate one row of insert/delete and return the normalized row."""
        if not isinstance(row, dict):
            raise YtError("Invalid row: expected a map", SCHEMA_VIOLATION, {"path": path})
        row = {k: (None if isinstance(v, Entity) else v) for k, v in row.items()}
        if self.sorted:
            return self._normalize_sorted(row, op, path, update)
        return self._normalize_ordered(row, op, path)

    def _normalize_sorted(
        self, row: dict[str, Any], op: str, path: str, update: bool
    ) -> dict[str, Any]:
        """A row of a sorted table: key columns present, values of the schema's types."""
        for k in self.key_columns:
            if k not in row:
                raise YtError(
                    f"Missing key column {k!r} in row",
                    SCHEMA_VIOLATION,
                    {"path": path, "column": k},
                )
        if op == "delete":
            row = {k: row[k] for k in self.key_columns}
        out = {}
        for k, v in row.items():
            col = self.schema.by_name.get(k)
            if col is None:
                raise YtError(
                    f"Column {k!r} does not belong to the schema of table {path}",
                    SCHEMA_VIOLATION,
                    {"path": path, "column": k},
                )
            if col.expression:
                raise YtError(
                    f"Computed column {k!r} cannot be written", SCHEMA_VIOLATION, {"path": path}
                )
            out[k] = check_value(v, col, path)
        if op == "insert" and not update:
            for col in self.schema.columns:
                if col.required and out.get(col.name) is None and not col.sort_order:
                    raise YtError(
                        f"Required column {col.name!r} cannot have null value",
                        SCHEMA_VIOLATION,
                        {"path": path, "column": col.name},
                    )
        if op == "insert" and update:
            for col in self.schema.columns:
                if col.required and col.name in out and out[col.name] is None:
                    raise YtError(
                        f"Required column {col.name!r} cannot have null value",
                        SCHEMA_VIOLATION,
                        {"path": path, "column": col.name},
                    )
        for k in self.key_columns:
            col = self.schema.by_name[k]
            if col.required and out.get(k) is None:
                raise YtError(
                    f"Required key column {k!r} cannot be null",
                    SCHEMA_VIOLATION,
                    {"path": path},
                )
        return out

    def _normalize_ordered(self, row: dict[str, Any], op: str, path: str) -> dict[str, Any]:
        """A row of an ordered table: only ``$tablet_index`` of the system columns."""
        if op == "delete":
            raise YtError(f"Cannot delete rows from ordered table {path}", 1, {"path": path})
        out = {}
        for k, v in row.items():
            if k == "$tablet_index":
                if v is None:
                    continue
                if (
                    isinstance(v, bool)
                    or not isinstance(v, int)
                    or not 0 <= int(v) < len(self.tablets)
                ):
                    raise YtError(
                        f"Invalid $tablet_index {v!r} for table {path} with {len(self.tablets)} "
                        "tablets",
                        SCHEMA_VIOLATION,
                        {"path": path},
                    )
                out[k] = int(v)
                continue
            if k in ("$row_index", "$timestamp", "$cumulative_data_weight"):
                raise YtError(
                    f"System column {k!r} cannot be written", SCHEMA_VIOLATION, {"path": path}
                )
            col = self.schema.by_name.get(k)
            if col is None:
                raise YtError(
                    f"Column {k!r} does not belong to the schema of table {path}",
                    SCHEMA_VIOLATION,
                    {"path": path, "column": k},
                )
            out[k] = check_value(v, col, path)
        for col in self.schema.columns:
            if col.required and out.get(col.name) is None:
                raise YtError(
                    f"Required column {col.name!r} cannot have null value",
                    SCHEMA_VIOLATION,
                    {"path": path, "column": col.name},
                )
        return out

    def apply_sorted(
        self, op: str, row: dict[str, Any], flags: dict[str, Any], commit_ts: int, horizon: int
    ) -> None:
        """Write one committed row version at ``commit_ts``; versions older than ``horizon`` go."""
        skey = key_of(row, self.key_columns)
        versions = self.store.get(skey)
        prev = versions[-1][1] if versions else None
        if op == "delete":
            new = None
        else:
            if flags.get("update") or flags.get("aggregate"):
                new = (
                    dict(prev) if prev is not None else {c.name: None for c in self.schema.columns}
                )
            else:
                new = {c.name: None for c in self.schema.columns}
            for k, v in row.items():
                col = self.schema.by_name[k]
                if flags.get("aggregate") and col.aggregate and prev is not None:
                    new[k] = _aggregate(col.aggregate, prev.get(k), v)
                else:
                    new[k] = v
            if not (flags.get("update") or flags.get("aggregate")):
                for c in self.schema.columns:
                    new.setdefault(c.name, None)
            for c in self.schema.columns:
                if c.required and new.get(c.name) is None:
                    raise YtError(
                        f"Required column {c.name!r} cannot have null value", SCHEMA_VIOLATION
                    )
        if versions is None:
            if new is None:
                return
            versions = []
            self.store[skey] = versions
            self.sorted_keys.add(skey)
        versions.append((commit_ts, new))
        self.live_rows += (new is not None) - (prev is not None)
        if len(versions) > 4:
            # Drop versions no active transaction can read any more (older than the
            # newest version at or below the oldest active start timestamp).
            keep_from = 0
            for i, (ts, _) in enumerate(versions):
                if ts <= horizon:
                    keep_from = i
            if keep_from:
                del versions[:keep_from]

    def last_write_ts(self, row: dict[str, Any]) -> int:
        """The commit timestamp of the newest version at the row's key (for conflict checks)."""
        versions = self.store.get(key_of(row, self.key_columns))
        return versions[-1][0] if versions else 0


def _aggregate(fn: str, old: Any, new: Any) -> Any:
    """Combine an aggregate column's old and new values (``sum``, ``min``, ``max``, ``first``)."""
    if old is None:
        return new
    if new is None:
        return old
    if fn == "sum":
        r = old + new
        return Uint64(r) if isinstance(old, Uint64) else r
    if fn == "min":
        return min(old, new)
    if fn == "max":
        return max(old, new)
    if fn == "first":
        return old
    return new
