"""Scheduler operations the sinks use: ``sort``, ``merge`` (and ``erase``).

Follows https://ytsaurus.tech/docs/en/user-guide/data-processing/operations/sort
(output sorted by ``sort_by``; the output schema is the input schema sorted by
``sort_by`` when the output is empty/weak, or the output's strong schema sorted by
``sort_by``), https://ytsaurus.tech/docs/en/user-guide/data-processing/operations/merge
(``mode`` ``unordered``/``ordered``/``sorted``; sorted mode requires sorted inputs
and merges by ``merge_by``; ``combine_chunks`` produces large chunks) and
https://ytsaurus.tech/docs/en/user-guide/data-processing/operations/erase.
Operations run under the user's transaction (``transaction_id``): the scheduler's
output transaction is nested in it, so the output is visible in that transaction
and locked by it after the operation completes
(https://ytsaurus.tech/docs/en/user-guide/storage/transactions, "Using transactions
in operations").  Operations complete synchronously inside ``start_operation``;
``get_operation`` then reports ``completed`` or ``failed`` with ``result/error``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import common
from .common import new_id, now_iso
from .errors import NO_SUCH_OPERATION, SORT_ORDER_VIOLATION, YtError
from .keys import check_sorted, key_of
from .schema import Schema
from .tables import table_schema
from .yson import unwrap

if TYPE_CHECKING:
    from .state import EmulatorState


class Operation:
    def __init__(self, op_type: str, spec: dict[str, Any], user_tx: str | None) -> None:
        self.id = new_id(common.TYPE_OPERATION)
        self.type = op_type
        self.spec = spec
        self.user_tx = user_tx
        self.state = "running"
        self.start_time = now_iso()
        self.finish_time = None
        self.error = None
        self.authenticated_user = "root"

    def attributes(self) -> dict[str, Any]:
        """The operation's attributes as ``get_operation`` returns them."""
        attrs = {
            "id": self.id,
            "type": self.type,
            "operation_type": self.type,
            "state": self.state,
            "start_time": self.start_time,
            "authenticated_user": "root",
            "spec": self.spec,
            "full_spec": self.spec,
            "unrecognized_spec": {},
            "alerts": {},
            "runtime_parameters": {},
            "brief_spec": {
                k: v
                for k, v in self.spec.items()
                if k in ("input_table_paths", "output_table_path", "output_table_paths", "title")
            },
            "suspended": False,
            "events": [],
            "controller_agent_address": "emulator",
            "brief_progress": {
                "jobs": {
                    "total": 1,
                    "running": 0,
                    "completed": 1 if self.state == "completed" else 0,
                    "failed": 1 if self.state == "failed" else 0,
                    "pending": 0,
                    "aborted": 0,
                    "lost": 0,
                }
            },
            "progress": {
                "jobs": {"total": 1, "completed": {"total": 1 if self.state == "completed" else 0}}
            },
            "result": {"error": self.error} if self.error is not None else {},
        }
        if self.finish_time:
            attrs["finish_time"] = self.finish_time
        return attrs


def _paths(value: Any) -> list[Any]:
    """The table paths of an operation spec's ``input_table_paths`` (or one path)."""
    value = unwrap(value)[0]
    if isinstance(value, list):
        return value
    return [value]


class Operations:
    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        self.ops = {}

    def start(self, params: dict[str, Any]) -> Operation:
        """``start_operation``: the operation runs at once, finished when the call returns."""
        op_type = params.get("operation_type") or params.get("type")
        spec = unwrap(params.get("spec") or {})[0]
        user_tx = self.state.txm.normalize(params.get("transaction_id"))
        if user_tx is not None:
            self.state.txm.get_master(user_tx)
        spec_tx = self.state.txm.normalize(spec.get("transaction_id"))
        if spec_tx is not None:
            user_tx = spec_tx
            self.state.txm.get_master(user_tx)
        op = Operation(op_type, spec, user_tx)
        self.ops[op.id] = op
        runner = {"sort": self._sort, "merge": self._merge, "erase": self._erase}.get(op_type)
        if runner is None:
            op.state = "failed"
            op.error = YtError(
                f"Operation type {op_type!r} is not supported by the emulator", 1
            ).to_dict()
            op.finish_time = now_iso()
            return op
        txm = self.state.txm
        # As the scheduler does: inputs are snapshot-locked in an input transaction and
        # outputs written in an output transaction, both nested in the user transaction.
        in_tx = txm.start(
            {
                "type": "master",
                "transaction_id": user_tx,
                "timeout": 3600 * 1000,
                "attributes": {"title": f"Scheduler input transaction for operation {op.id}"},
            }
        )
        out_tx = txm.start(
            {
                "type": "master",
                "transaction_id": user_tx,
                "timeout": 3600 * 1000,
                "attributes": {"title": f"Scheduler output transaction for operation {op.id}"},
            }
        )
        self._in_tx = in_tx.id
        try:
            runner(op, spec, out_tx.id)
            txm.commit(out_tx.id)
            txm.abort(in_tx.id)
            op.state = "completed"
        except YtError as e:
            for t in (out_tx.id, in_tx.id):
                try:
                    txm.abort(t)
                except YtError:
                    pass
            op.state = "failed"
            op.error = YtError("Operation has failed to prepare", 1, inner_errors=[e]).to_dict()
        op.finish_time = now_iso()
        return op

    def get(self, op_id: str) -> Operation:
        """The operation ``op_id``, or the error YT returns for an unknown one."""
        op = self.ops.get(op_id)
        if op is None:
            raise YtError(f"No such operation {op_id}", NO_SUCH_OPERATION, {"operation_id": op_id})
        return op

    def abort(self, op_id: str) -> dict[str, Any]:
        """``abort_operation``: a finished operation stays as it ended."""
        op = self.get(op_id)
        if op.state not in ("completed", "failed", "aborted"):
            op.state = "aborted"
        return {}

    def on_transaction_finished(self, tx_id: str | None, committed: bool) -> None:
        """Operations run at once, so the end of their transaction leaves nothing to do."""
        pass

    # ---------------------------------------------------------------- helpers

    def _input(
        self, paths: list[Any], tx: str | None
    ) -> list[tuple[list[dict[str, Any]], Schema, str]]:
        """Read input tables: list of (rows, schema, text)."""
        out = []
        st_tables = self.state.tables
        for p in _paths(paths):
            node, text = st_tables.require_table(p, self._in_tx)
            self.state.cypress.take_lock(node, self._in_tx, "snapshot")
            tx = self._in_tx
            if node.dyn is not None:
                rows, schema = st_tables._dynamic_rows(node, {"path": p}, text)
                rows = [{k: v for k, v in r.items() if not k.startswith("$")} for r in rows]
            else:
                st = self.state.cypress.view(node, tx)
                schema = table_schema(st)
                params = {"path": p}
                rows, _ = st_tables.read(params, tx)
                rows = [r for r in rows if isinstance(r, dict)]
            out.append((rows, schema, text))
        return out

    def _output(
        self,
        path: Any,
        tx: str | None,
        rows: list[dict[str, Any]],
        inferred_schema: Schema,
        sort_by: list[str] | None = None,
        combine: bool = True,
        unique: bool = False,
        chunks: list[Any] | None = None,
    ) -> None:
        """Write an operation's output rows, with the schema its spec asks for."""
        node, text = self.state.tables.require_table(path, tx)
        attrs = unwrap(path)[1]
        append = bool(attrs.get("append", False))
        st = self.state.cypress.view(node, tx)
        out_schema = table_schema(st)
        strong = st.attrs.get("schema_mode") == "strong" and not out_schema.is_empty()
        new_schema = None
        if strong:
            target = (
                out_schema.with_sort(sort_by, unique_keys=out_schema.unique_keys)
                if sort_by
                else out_schema
            )
            if sort_by and not append:
                new_schema = target.to_yson()
        else:
            target = inferred_schema
            if not append:
                new_schema = target.to_yson()
        if chunks is None:
            chunks = [rows]
        if sort_by and unique:
            check_sorted(rows, sort_by, True, text)
        self.state.tables.write_rows(
            node, text, chunks, tx, append, new_schema=new_schema if not append else None
        )

    # ---------------------------------------------------------------- sort

    def _sort(self, op: Operation, spec: dict[str, Any], tx: str | None) -> None:
        """A ``sort`` operation."""
        sort_by = [unwrap(c)[0] for c in _paths(spec.get("sort_by"))]
        sort_by = [c["name"] if isinstance(c, dict) else c for c in sort_by]
        if not sort_by:
            raise YtError('"sort_by" is required for sort', 1)
        inputs = self._input(spec.get("input_table_paths"), tx)
        rows = [r for rs, _, _ in inputs for r in rs]
        rows.sort(key=lambda r: key_of(r, sort_by))
        base = inputs[0][1] if inputs else Schema.empty_weak()
        if any(not s.same_columns(base) for _, s, _ in inputs[1:]):
            base = Schema.empty_weak()
        inferred = base.without_sort().with_sort(sort_by)
        output = spec.get("output_table_path")
        if output is None:
            raise YtError('"output_table_path" is required for sort', 1)
        self._output(output, tx, rows, inferred, sort_by=sort_by)

    # ---------------------------------------------------------------- merge

    def _merge(self, op: Operation, spec: dict[str, Any], tx: str | None) -> None:
        """A ``merge`` operation."""
        mode = spec.get("mode", "unordered")
        inputs = self._input(spec.get("input_table_paths"), tx)
        combine = bool(spec.get("combine_chunks", False))
        output = spec.get("output_table_path")
        if output is None:
            raise YtError('"output_table_path" is required for merge', 1)
        base = inputs[0][1] if inputs else Schema.empty_weak()
        same = all(s.same_columns(base) for _, s, _ in inputs[1:])
        if mode == "sorted":
            for _, s, text in inputs:
                if not s.sorted:
                    raise YtError(
                        f"Input table {text} is not sorted", SORT_ORDER_VIOLATION, {"path": text}
                    )
            merge_by = spec.get("merge_by")
            if merge_by is None:
                merge_by = inputs[0][1].key_columns if inputs else []
                for _, s, _ in inputs[1:]:
                    common_prefix = []
                    for a, b in zip(merge_by, s.key_columns):
                        if a != b:
                            break
                        common_prefix.append(a)
                    merge_by = common_prefix
            merge_by = [unwrap(c)[0] for c in merge_by]
            for _, s, text in inputs:
                if s.key_columns[: len(merge_by)] != merge_by:
                    raise YtError(
                        f"Input table {text} is not sorted by {merge_by!r}",
                        SORT_ORDER_VIOLATION,
                    )
            rows = [r for rs, _, _ in inputs for r in rs]
            rows.sort(key=lambda r: key_of(r, merge_by))  # stable: keeps input order for equal keys
            inferred = (
                (base if same else Schema.empty_weak()).without_sort().with_sort(merge_by)
                if merge_by
                else base
            )
            self._output(output, tx, rows, inferred, sort_by=merge_by or None, combine=True)
            return
        rows = [r for rs, _, _ in inputs for r in rs]
        inferred = base if same else Schema.empty_weak()
        if mode == "unordered" or mode == "ordered":
            inferred = inferred.without_sort() if inferred.sorted and len(inputs) > 1 else inferred
        else:
            raise YtError(f"Unknown merge mode {mode!r}", 1)
        # Without combine_chunks every input keeps (at least) its own chunk.
        chunks = [rows] if combine else [rs for rs, _, _ in inputs]
        self._output(output, tx, rows, inferred, chunks=chunks)

    def _erase(self, op: Operation, spec: dict[str, Any], tx: str | None) -> None:
        """An ``erase`` operation."""
        path = spec.get("table_path")
        node, text = self.state.tables.require_table(path, tx)
        attrs = unwrap(path)[1]
        st = self.state.cypress.view(node, tx)
        rows = list(st.rows())
        if attrs.get("ranges"):
            keep = []
            schema = table_schema(st)
            drop = set()
            for rng in attrs["ranges"]:
                lo, hi = self.state.tables._range_bounds(rng, rows, schema, text)
                drop.update(range(lo, hi))
            keep = [r for i, r in enumerate(rows) if i not in drop]
        else:
            keep = []
        self.state.tables.write_rows(node, text, [keep], tx, False)
