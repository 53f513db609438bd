"""Static tables and files, and ``alter_table`` of any table."""

from __future__ import annotations

from typing import Any

from ..common import to_bool
from ..dyntable import DynTable
from ..errors import (
    YtError,
)
from ..schema import Schema
from ..tables import row_count, table_schema
from ..yson import unwrap
from .base import Binary, CommandsBase, Tabular, command


class TableCommands(CommandsBase):
    @command("write_table")
    def write_table(self, params: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
        return self.state.tables.write(params, rows, self.tx(params))

    @command("read_table")
    def read_table(self, params: dict[str, Any], _: Any) -> Tabular:
        rows, rp = self.state.tables.read(params, self.tx(params))
        return Tabular(rows, rp)

    @command("write_file")
    def write_file(self, params: dict[str, Any], data: bytes) -> dict[str, Any]:
        tx = self.tx(params)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        if node.type != "file":
            raise YtError(f"Node {text} is not a file", 1)
        append = bool(unwrap(params["path"])[1].get("append", False))
        self.cypress.write_state(
            node,
            tx,
            chunks=[data] if data else [],
            chunks_mode="append" if append else "replace",
            lock_mode="shared" if append else "exclusive",
        )
        return {}

    @command("read_file")
    def read_file(self, params: dict[str, Any], _: Any) -> Binary:
        tx = self.tx(params)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        if node.type != "file":
            raise YtError(f"Node {text} is not a file", 1)
        data = b"".join(self.cypress.view(node, tx).chunks)
        offset = int(params.get("offset") or 0)
        length = params.get("length")
        data = data[offset:] if length is None else data[offset : offset + int(length)]
        return Binary(data)

    @command("concatenate")
    def concatenate(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        return self.state.tables.concatenate(params, self.tx(params))

    @command("alter_table")
    def alter_table(self, params: dict[str, Any], _: Any) -> dict[str, Any]:
        tx = self.tx(params)
        node, rest, attr_path, text = self.cypress.resolve(params["path"], tx)
        if node.type != "table":
            raise YtError(f"Node {text} is not a table", 1)
        new_schema = params.get("schema")
        dynamic = params.get("dynamic")
        if node.dyn is not None:
            if node.dyn.any_not_unmounted():
                raise YtError(
                    f'Cannot alter table {text} since not all of its tablets are in "unmounted" '
                    "state",
                    1,
                )
            if new_schema is not None:
                schema = Schema.parse(new_schema)
                old = node.dyn.schema
                if (
                    schema.key_columns[: len(old.key_columns)] != old.key_columns
                    or not schema.strict
                ):
                    raise YtError(f"Incompatible schema change for dynamic table {text}", 314)
                for col in old.columns:
                    nc = schema.by_name.get(col.name)
                    if nc is None or nc.type != col.type:
                        raise YtError(
                            f"Cannot remove or change column {col.name!r} of dynamic table", 314
                        )
                if schema.sorted and not schema.unique_keys:
                    schema = Schema(schema.columns, strict=True, unique_keys=True)
                node.dyn.schema = schema
                node.dyn.key_columns = list(schema.key_columns)
                self.cypress.write_state(node, tx, attrs={"schema": schema})
            if dynamic is not None and not to_bool(dynamic):
                raise YtError(
                    "Converting dynamic tables to static is not supported by the emulator", 1
                )
            return {}
        st = self.cypress.view(node, tx)
        if new_schema is not None:
            schema = Schema.parse(new_schema)
            if (
                row_count(st)
                and not table_schema(st).is_empty()
                and not _compatible(table_schema(st), schema)
            ):
                raise YtError(
                    f"Cannot alter schema of non-empty table {text}: incompatible schema", 314
                )
            for r in st.rows():
                schema.validate_row(r, text)
            self.cypress.write_state(node, tx, attrs={"schema": schema, "schema_mode": "strong"})
        if dynamic is not None and to_bool(dynamic):
            schema = table_schema(self.cypress.view(node, tx))
            if schema.is_empty() or not schema.strict:
                raise YtError(f"Cannot make table {text} dynamic: it must have a strict schema", 1)
            if schema.sorted and not schema.unique_keys:
                raise YtError(f"Cannot make table {text} dynamic: schema must have unique keys", 1)
            if tx is not None:
                raise YtError("Cannot convert a table to dynamic inside a transaction", 1)
            dyn = DynTable(node, schema)
            ts = self.state.clock.next()
            for r in st.rows():
                if dyn.sorted:
                    dyn.apply_sorted(
                        "insert", {k: v for k, v in r.items() if k in schema.by_name}, {}, ts, ts
                    )
                else:
                    dyn.tablets[0].rows.append(dict(r))
            node.dyn = dyn
            self.cypress.write_state(node, None, chunks=[], chunks_mode="replace")
        return {}


def _compatible(old: Schema, new: Schema) -> bool:
    for col in old.columns:
        nc = new.by_name.get(col.name)
        if nc is None:
            if new.strict:
                return False
            continue
        if nc.type != col.type and nc.type != "any":
            return False
    return True
