"""Dynamic tables: tablet states, rows, queries, queues and consumers."""

from __future__ import annotations

from typing import Any

from ..errors import (
    YtError,
)
from ..query import parse_query
from ..query_eval import execute
from .base import CommandsBase, Tabular, _b, _s, command


class DynamicCommands(CommandsBase):
    @command("mount_table")
    def mount_table(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.dynamic.mount(params)

    @command("unmount_table")
    def unmount_table(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.dynamic.unmount(params)

    @command("remount_table")
    def remount_table(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.dynamic.remount(params)

    @command("freeze_table")
    def freeze_table(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.dynamic.freeze(params, True)

    @command("unfreeze_table")
    def unfreeze_table(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.dynamic.freeze(params, False)

    @command("reshard_table")
    def reshard_table(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.dynamic.reshard(params)

    @command("trim_rows")
    def trim_rows(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.dynamic.trim(params)

    @command("pull_queue")
    def pull_queue(self, params: dict[str, Any], _: Any) -> Tabular:
        return Tabular(self.state.dynamic.pull_queue(params), {})

    @command("get_tablet_infos")
    def get_tablet_infos(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.dynamic.tablet_infos(params)

    @command("register_queue_consumer")
    def register_queue_consumer(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.consumers.register(params)

    @command("unregister_queue_consumer")
    def unregister_queue_consumer(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.consumers.unregister(params)

    @command("list_queue_consumer_registrations")
    def list_queue_consumer_registrations(self, params: dict[str, Any], _: Any) -> list[Any]:
        return self.state.consumers.list(params)

    @command("advance_consumer", "advance_queue_consumer")
    def advance_consumer(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.consumers.advance(params)

    @command("pull_consumer", "pull_queue_consumer")
    def pull_consumer(self, params: dict[str, Any], _: Any) -> Tabular:
        return Tabular(self.state.consumers.pull(params), {})

    @command("insert_rows")
    def insert_rows(self, params: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
        return self.state.dynamic.modify(params, rows, "insert")

    @command("delete_rows")
    def delete_rows(self, params: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
        return self.state.dynamic.modify(params, rows, "delete")

    @command("lock_rows")
    def lock_rows(self, params: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
        tx_id = self.txm.normalize(params.get("transaction_id"))
        node, dyn, path = self.state.dynamic.table(params["path"])
        if tx_id is not None:
            self.state.dynamic._tablet_tx(tx_id)
        return {}

    @command("lookup_rows")
    def lookup_rows(self, params: dict[str, Any], keys: list[Any]) -> Tabular:
        return Tabular(self.state.dynamic.lookup(params, keys))

    @command("select_rows")
    def select_rows(self, params: dict[str, Any], _: Any) -> Tabular:
        q = parse_query(_s(params["query"]))
        tx_id = self.txm.normalize(params.get("transaction_id"))
        if tx_id is not None:
            self.state.dynamic._tablet_tx(tx_id)
        dyn, rows = self.state.dynamic.rows_for_query(q.path, params)
        columns = ([] if dyn.sorted else ["$tablet_index", "$row_index"]) + [
            c.name for c in dyn.schema.columns
        ]
        limit = params.get("output_row_limit")
        input_limit = params.get("input_row_limit")
        if input_limit is not None and len(rows) > int(input_limit):
            if _b(params, "fail_on_incomplete_result", True):
                raise YtError("Query terminated prematurely due to excessive input", 1)
            rows = rows[: int(input_limit)]
        out = execute(q, rows, columns)
        if limit is not None and len(out) > int(limit):
            if _b(params, "fail_on_incomplete_result", True):
                raise YtError("Query terminated prematurely due to excessive output", 1)
            out = out[: int(limit)]
        return Tabular(out, {})
