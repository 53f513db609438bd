"""Dynamic tables: sorted (key-value, MVCC) and ordered (queues).

Behaviour follows:

* https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/overview (mount/unmount/freeze,
  ``@tablet_state``; a table must be mounted to be read or written);
* https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/sorted-dynamic-tables (strict
  schema with ``unique_keys``, key columns a prefix; ``insert_rows`` overwrites the row,
  missing columns become null, ``update`` keeps them, ``aggregate`` combines aggregate
  columns; ``delete_rows`` writes a tombstone; ``lookup_rows``);
* https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/ordered-dynamic-tables
  (``$tablet_index``/``$row_index``, ``trim_rows`` keeps numbering, ``$timestamp``);
* https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/transactions (reads at the
  start timestamp, own writes invisible to own reads, write-write conflicts 1700
  between transactions with overlapping lifetimes, 100,000 rows per transaction,
  ``atomicity`` must match the table).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from .dyntable import (
    ASYNC_LAST_COMMITTED,
    MAX_TS,
    SYNC_LAST_COMMITTED,
    TRANSIENT,
    Tablet,
)
from .errors import (
    INVALID_TABLET_STATE,
    NO_SUCH_TABLET,
    SCHEMA_VIOLATION,
    TABLET_NOT_MOUNTED,
    TABLET_TRANSACTION_LOCK_CONFLICT,
    TOO_MANY_ROWS_IN_TRANSACTION,
    YtError,
)
from .keys import key_of
from .queues import QueueReads
from .schema import check_value
from .yson import Uint64

if TYPE_CHECKING:
    from .dyntable import DynTable
    from .nodes import Node
    from .state import EmulatorState
    from .transactions import TabletTransaction


class DynamicTables(QueueReads):
    """Commands on dynamic tables.  Called with the state lock held."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        self.rng = random.Random()

    @property
    def config(self) -> dict[str, Any]:
        """The emulator's configuration (mount delay, row limit per transaction)."""
        return self.state.config

    def table(self, path: Any, tx: str | None = None) -> tuple[Node, DynTable, str]:
        """The node and data of the dynamic table at ``path``; a static table fails."""
        node, _, _, text = self.state.cypress.resolve(path, tx)
        if node.dyn is None:
            raise YtError(f"Table {text} is not dynamic", 1, {"path": text})
        return node, node.dyn, text

    # ---------------------------------------------------------------- mount/unmount

    def mount(self, params: dict[str, Any]) -> dict[str, Any]:
        """``mount_table``: tablets go ``mounting`` then ``mounted``."""
        node, dyn, path = self.table(params["path"])
        tablets = dyn.tablet_range(
            params.get("first_tablet_index"), params.get("last_tablet_index")
        )
        freeze = bool(params.get("freeze", False))
        delay = self.config["mount_delay"]
        for t in tablets:
            s = t.current()
            if s in TRANSIENT:
                raise YtError(
                    f"Tablet {t.index} of table {path} is in {s!r} state",
                    1744,
                    {"path": path},
                )
            if s == "unmounted":
                t.transition("mounting", "frozen" if freeze else "mounted", delay)
            elif s == "frozen" and not freeze:
                pass  # YT: mount of a frozen tablet is a no-op; use unfreeze_table.
        return {}

    def unmount(self, params: dict[str, Any]) -> dict[str, Any]:
        """``unmount_table``: tablets go ``unmounting`` then ``unmounted``."""
        node, dyn, path = self.table(params["path"])
        tablets = dyn.tablet_range(
            params.get("first_tablet_index"), params.get("last_tablet_index")
        )
        for t in tablets:
            s = t.current()
            if s in TRANSIENT:
                raise YtError(
                    f"Tablet {t.index} of table {path} is in {s!r} state",
                    1744,
                    {"path": path},
                )
            if s != "unmounted":
                t.transition("unmounting", "unmounted", self.config["mount_delay"])
        return {}

    def remount(self, params: dict[str, Any]) -> dict[str, Any]:
        """``remount_table``: settings only, the tablets stay as they are."""
        self.table(params["path"])
        return {}

    def freeze(self, params: dict[str, Any], freeze: bool = True) -> dict[str, Any]:
        """``freeze_table``/``unfreeze_table`` of a tablet range."""
        node, dyn, path = self.table(params["path"])
        tablets = dyn.tablet_range(
            params.get("first_tablet_index"), params.get("last_tablet_index")
        )
        for t in tablets:
            s = t.current()
            if freeze:
                if s == "mounted":
                    t.transition("freezing", "frozen", self.config["mount_delay"])
                elif s != "frozen":
                    raise YtError(
                        f"Cannot freeze tablet {t.index} in {s!r} state", INVALID_TABLET_STATE
                    )
            else:
                if s == "frozen":
                    t.transition("unfreezing", "mounted", self.config["mount_delay"])
                elif s != "mounted":
                    raise YtError(
                        f"Cannot unfreeze tablet {t.index} in {s!r} state", INVALID_TABLET_STATE
                    )
        return {}

    def reshard(self, params: dict[str, Any]) -> dict[str, Any]:
        """``reshard_table``: a new tablet count; an ordered table's extra tablets pass their
        rows to the last one kept."""
        node, dyn, path = self.table(params["path"])
        if dyn.any_not_unmounted():
            raise YtError(
                f"Cannot reshard table {path} since not all of its tablets are unmounted",
                INVALID_TABLET_STATE,
            )
        count = params.get("tablet_count")
        if count is None:
            pivots = params.get("pivot_keys") or [[]]
            count = len(pivots)
        count = int(count)
        if dyn.sorted:
            dyn.tablets = [Tablet(i) for i in range(count)]
        else:
            old = dyn.tablets
            new = [Tablet(i) for i in range(count)]
            for i, t in enumerate(old[:count]):
                new[i] = t
            for t in old[count:]:
                new[-1].rows.extend(t.rows)
            dyn.tablets = new
        return {}

    def trim(self, params: dict[str, Any]) -> dict[str, Any]:
        """``trim_rows``: drop a tablet's rows below a row index, keeping the numbering."""
        node, dyn, path = self.table(params["path"])
        if dyn.sorted:
            raise YtError(f"Cannot trim sorted table {path}", 1, {"path": path})
        idx = int(params["tablet_index"])
        if not 0 <= idx < len(dyn.tablets):
            raise YtError(f"Invalid tablet index {idx}", NO_SUCH_TABLET)
        t = dyn.tablets[idx]
        if t.current() not in ("mounted", "frozen"):
            raise YtError(f"Tablet {idx} of table {path} is not mounted", TABLET_NOT_MOUNTED)
        count = int(params["trimmed_row_count"])
        if count > t.total:
            raise YtError(
                f"Cannot trim tablet {idx} at row {count} since it only has {t.total} rows",
                1,
                {"path": path},
            )
        if count > t.trimmed:
            del t.rows[: count - t.trimmed]
            t.trimmed = count
        return {}

    # ---------------------------------------------------------------- writes

    def _tablet_tx(self, tx_id: str | None) -> TabletTransaction:
        """The active tablet transaction ``tx_id`` (a master one is refused, as in YT)."""
        t = self.state.txm.get_any(tx_id)
        if t.kind != "tablet":
            raise YtError(
                f"Dynamic table commands can not be performed under master transaction {tx_id}",
                1,
                {"transaction_id": tx_id},
            )
        return t

    def modify(self, params: dict[str, Any], rows: list[dict[str, Any]], op: str) -> dict[str, Any]:
        """``insert_rows``/``delete_rows``: into the tablet transaction's buffer, or, without
        one, in a transaction of their own committed at once."""
        tx_id = self.state.txm.normalize(params.get("transaction_id"))
        node, dyn, path = self.table(params["path"])
        update = bool(params.get("update", False))
        aggregate = bool(params.get("aggregate", False))
        flags = {"update": update, "aggregate": aggregate}
        normalized = [dyn.normalize_write(r, op, path, update=update or aggregate) for r in rows]
        if tx_id is None:
            atomicity = params.get("atomicity") or dyn.atomicity
            t = self.state.txm.start(
                {"type": "tablet", "sticky": True, "atomicity": atomicity, "timeout": 60000}
            )
            try:
                self._buffer(t, node, dyn, path, normalized, op, flags)
                self.commit(t)
            finally:
                self.state.txm._finish(t, "committed")
            return {}
        t = self._tablet_tx(tx_id)
        self._buffer(t, node, dyn, path, normalized, op, flags)
        return {}

    def _buffer(
        self,
        t: TabletTransaction,
        node: Node,
        dyn: DynTable,
        path: str,
        rows: list[dict[str, Any]],
        op: str,
        flags: dict[str, Any],
    ) -> None:
        """Check the rows and add them to the transaction's buffer for ``commit``."""
        if dyn.sorted:
            dyn.require_writable(path)
        else:
            dyn.require_writable(
                path, [dyn.tablets[r["$tablet_index"]] for r in rows if "$tablet_index" in r]
            )
            if not any(tab.current() == "mounted" for tab in dyn.tablets):
                dyn.require_writable(path)
        for r in rows:
            t.writes.append((node.id, op, r, flags))
        t.row_count += len(rows)

    def commit(self, t: TabletTransaction) -> int:
        """Commit a tablet transaction: conflict checks, then apply atomically."""
        limit = self.config["max_rows_per_transaction"]
        if t.row_count > limit:  # the proxy counts the buffered rows as it commits them
            raise YtError(
                "Transaction affects too many rows",
                TOO_MANY_ROWS_IN_TRANSACTION,
                {"limit": limit, "transaction_id": t.id},
            )
        by_table = {}
        for node_id, op, row, flags in t.writes:
            by_table.setdefault(node_id, []).append((op, row, flags))
        tables = []
        for node_id, writes in by_table.items():
            node = self.state.cypress.get_node(node_id)
            if node is None or node.dead or node.dyn is None:
                raise YtError(f"Table {node_id} was removed during transaction {t.id}", 1)
            dyn = node.dyn
            path = self.state.cypress.path_of(node, None)
            if dyn.atomicity != t.atomicity:
                raise YtError(
                    f"Transaction atomicity {t.atomicity!r} does not match atomicity "
                    f"{dyn.atomicity!r} of table {path}",
                    1,
                    {"path": path},
                )
            tables.append((node, dyn, path, writes))
        for node, dyn, path, writes in tables:
            if dyn.sorted:
                dyn.require_writable(path)
                if t.atomicity == "full":
                    for op, row, flags in writes:
                        last = dyn.last_write_ts(row)
                        if last > t.start_ts:
                            key = [row.get(k) for k in dyn.key_columns]
                            raise YtError(
                                f"Row lock conflict due to concurrent write: key {key!r} of table "
                                f"{path} was "
                                "modified by a "
                                f"transaction committed after the start of transaction {t.id}",
                                TABLET_TRANSACTION_LOCK_CONFLICT,
                                {
                                    "path": path,
                                    "key": key,
                                    "transaction_id": t.id,
                                    "lock": "<primary>",
                                },
                            )
            else:
                if not any(tab.current() == "mounted" for tab in dyn.tablets):
                    dyn.require_writable(path)
        commit_ts = self.state.clock.next()
        horizon = min(
            [x.start_ts for x in self.state.txm.txs.values() if x.kind == "tablet"] + [commit_ts]
        )
        for node, dyn, path, writes in tables:
            if dyn.sorted:
                for op, row, flags in writes:
                    dyn.apply_sorted(op, row, flags, commit_ts, horizon)
            else:
                mounted = [tab for tab in dyn.tablets if tab.current() == "mounted"]
                for op, row, flags in writes:
                    row = dict(row)
                    idx = row.pop("$tablet_index", None)
                    tab = dyn.tablets[idx] if idx is not None else self.rng.choice(mounted)
                    if tab.current() != "mounted":
                        dyn.require_writable(path, [tab])
                    if "$timestamp" in dyn.schema.by_name:
                        row["$timestamp"] = Uint64(commit_ts)
                    tab.rows.append(row)
                    tab.last_write_ts = commit_ts
            dyn.last_commit_ts = commit_ts
        return commit_ts

    # ---------------------------------------------------------------- reads

    def read_ts(self, params: dict[str, Any]) -> int:
        """The timestamp a read sees: its transaction's start, the request's, or the newest."""
        tx_id = self.state.txm.normalize(params.get("transaction_id"))
        if tx_id is not None:
            t = self._tablet_tx(tx_id)
            return t.start_ts
        ts = params.get("timestamp")
        if ts is None or int(ts) in (SYNC_LAST_COMMITTED, ASYNC_LAST_COMMITTED):
            return MAX_TS
        return int(ts)

    def lookup(self, params: dict[str, Any], keys: list[Any]) -> list[dict[str, Any] | None]:
        """``lookup_rows``: the rows at ``keys`` in the order asked, missing ones skipped unless
        ``keep_missing_rows``."""
        node, dyn, path = self.table(params["path"])
        if not dyn.sorted:
            raise YtError(f"Cannot lookup rows in ordered table {path}", 1, {"path": path})
        dyn.require_readable(path)
        ts = self.read_ts(params)
        columns = params.get("column_names")
        keep_missing = bool(params.get("keep_missing_rows", False))
        out = []
        for key in keys:
            if not isinstance(key, dict):
                raise YtError("Invalid lookup key", SCHEMA_VIOLATION)
            for k in key:
                if k not in dyn.key_columns:
                    raise YtError(
                        f"Column {k!r} is not a key column of table {path}",
                        SCHEMA_VIOLATION,
                        {"path": path, "column": k},
                    )
            norm = {}
            for k in dyn.key_columns:
                if k not in key:
                    raise YtError(
                        f"Missing key column {k!r} in lookup key", SCHEMA_VIOLATION, {"path": path}
                    )
                norm[k] = check_value(key[k], dyn.schema.by_name[k], path)
            row = dyn.latest(key_of(norm, dyn.key_columns), ts)
            if row is None:
                if keep_missing:
                    out.append(None)
                continue
            if columns:
                for c in columns:
                    if c not in dyn.schema.by_name:
                        raise YtError(f"No such column {c!r}", 1, {"path": path})
                row = {c: row.get(c) for c in columns}
            out.append(row)
        return out

    def rows_for_query(
        self, path_text: Any, params: dict[str, Any]
    ) -> tuple[DynTable, list[dict[str, Any]]]:
        """Rows a query sees in table ``path_text`` (sorted by key / tablet, row index)."""
        node, dyn, path = self.table(path_text)
        dyn.require_readable(path)
        if dyn.sorted:
            ts = self.read_ts(params)
            return dyn, list(dyn.scan(ts))
        return dyn, list(dyn.ordered_rows())
