"""Reads of ordered dynamic tables as queues: ``pull_queue`` and ``get_tablet_infos``.

Rows keep their ``$row_index`` across trims; a partition of the queue is a tablet
(https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/queues).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import (
    NO_SUCH_TABLET,
    TABLET_NOT_MOUNTED,
    YtError,
)
from .yson import Uint64

if TYPE_CHECKING:
    from .dyntable import DynTable


class QueueReads:
    """The queue reads of ``DynamicTables`` (a part of it: ``table`` and ``read_ts`` are there)."""

    def ordered_table(self, path_text: Any, what: str) -> tuple[DynTable, str]:
        """The ordered dynamic table at ``path_text``, or the error YT gives ``what`` there."""
        node, _, _, text = self.state.cypress.resolve(path_text, None)
        if node.type != "table" or node.dyn is None or node.dyn.sorted:
            kind = "a sorted dynamic table" if node.dyn is not None else "not a dynamic table"
            raise YtError(
                f"{what} needs an ordered dynamic table, but {text} is {kind}",
                1,
                {"path": text},
            )
        return node.dyn, text

    def pull_queue(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Rows of one tablet from ``offset`` on: at most ``max_row_count`` (YT's default 1000),
        each with ``$tablet_index`` and ``$row_index``.  Rows below the tablet's trimmed row
        count are gone: the answer then starts at the first row that is left (the caller sees
        the gap in ``$row_index``).  The cost is that of the rows returned."""
        dyn, path = self.ordered_table(params["queue_path"], "pull_queue")
        idx = int(params.get("partition_index", 0))
        if not 0 <= idx < len(dyn.tablets):
            raise YtError(
                f"Invalid tablet index for table {path}: expected in range "
                f"[0, {len(dyn.tablets) - 1}], got {idx}",
                NO_SUCH_TABLET,
                {"path": path, "tablet_index": idx},
            )
        tablet = dyn.tablets[idx]
        state = tablet.current()
        if state not in ("mounted", "frozen", "freezing", "unfreezing"):
            raise YtError(
                f"Cannot read from table {path} since tablet {idx} is in {state!r} state",
                TABLET_NOT_MOUNTED,
                {"path": path, "tablet_state": state},
            )
        offset = int(params.get("offset", 0))
        limit = int(params.get("max_row_count", 1000))
        if limit <= 0 or offset < 0:
            raise YtError(
                f"Invalid pull_queue arguments: offset {offset}, max_row_count {limit}",
                1,
                {"path": path},
            )
        start = max(offset, tablet.trimmed) - tablet.trimmed
        out = []
        for i, row in enumerate(tablet.rows[start : start + limit]):
            item = {"$tablet_index": idx, "$row_index": tablet.trimmed + start + i}
            item.update(row)
            out.append(item)
        return out

    def tablet_infos(self, params: dict[str, Any]) -> dict[str, Any]:
        """``get_tablet_infos``: per requested tablet its row counts and timestamps."""
        node, dyn, path = self.table(params["path"])
        out = []
        for idx in params.get("tablet_indexes") or []:
            idx = int(idx)
            if not 0 <= idx < len(dyn.tablets):
                raise YtError(
                    f"Invalid tablet index for table {path}: got {idx}",
                    NO_SUCH_TABLET,
                    {"path": path, "tablet_index": idx},
                )
            t = dyn.tablets[idx]
            out.append(
                {
                    "total_row_count": t.total,
                    "trimmed_row_count": t.trimmed,
                    "barrier_timestamp": Uint64(self.state.clock.next()),
                    "last_write_timestamp": Uint64(t.last_write_ts or dyn.last_commit_ts),
                    "tablet_state": t.current(),
                }
            )
        return {"tablets": out}
