"""The YT tables of the sink: the output table (checked, or created on request), two aux tables.

* the **output table**: a mounted sorted dynamic table with ``unique_keys`` whose key starts with
  the source coordinates; :func:`create_output_table` makes one right;
* two aux tables, created by the sink on its first batch: ``<output>_eosink_progress`` (the
  proofs, :mod:`eosink_yt_dynamic.proof`) and ``<output>_eosink_keys`` (the registrations of
  the duplicate check, :mod:`eosink_yt_dynamic.registrations`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from eosink.logs import get_logger
from eosink.plugin import ConfigurationError
from eosink_yt_common import yt_schema

log = get_logger("eosink.yt_dynamic")


def _yson_schema(columns: Sequence[dict[str, Any]]) -> Any:
    import yt.yson as yson

    schema = yson.YsonList([dict(c) for c in columns])
    schema.attributes["unique_keys"] = any(c.get("sort_order") for c in columns)
    schema.attributes["strict"] = True
    return schema


def _arrow_schema(schema: Any) -> pa.Schema:
    """A pyarrow schema from a pyarrow schema, a Spark StructType or a Spark DataFrame."""
    if isinstance(schema, pa.Schema):
        return schema
    struct = getattr(schema, "schema", schema)  # a DataFrame has .schema
    from eosink.spark.executors import spark_arrow_schema

    return spark_arrow_schema(struct, "UTC")


def output_columns(
    schema: Any,
    *,
    queue_id: bool = False,
    tablet_index_column: str = "tablet_index",
    row_index_column: str = "row_index",
    queue_id_column: str = "queue_id",
    extra_key: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The YT schema of an output table for rows of ``schema``: key = source coordinates first."""
    from eosink_yt_dynamic.keys import SPYT_ROW_INDEX, SPYT_TABLET_INDEX

    arrow = _arrow_schema(schema)
    service = {SPYT_TABLET_INDEX: tablet_index_column, SPYT_ROW_INDEX: row_index_column}
    fields = [pa.field(service.get(f.name, f.name), f.type) for f in arrow]
    names = [f.name for f in fields]
    if queue_id and queue_id_column not in names:
        fields.insert(0, pa.field(queue_id_column, pa.string()))
    for column in (tablet_index_column, row_index_column):
        if column not in [f.name for f in fields]:
            fields.append(pa.field(column, pa.int64()))
    key = ([queue_id_column] if queue_id else []) + [tablet_index_column, row_index_column]
    key += [k for k in extra_key if k not in key]
    columns = yt_schema(pa.schema(fields), key)
    for column in columns:  # the key of a source row never is null
        if column["name"] in key:
            column["required"] = True
    return columns


def keyed_columns(schema: Any, key: Sequence[str]) -> list[dict[str, Any]]:
    """The YT schema of a table for rows of ``schema`` keyed by ``key`` (the transactional
    mode: rows replaced by a key of the query, e.g. an aggregation's groupBy columns)."""
    arrow = _arrow_schema(schema)
    missing = [k for k in key if k not in arrow.names]
    if missing:
        raise ConfigurationError(
            f"key columns {missing} are not columns of the rows {arrow.names}. Fix: name key "
            "columns the query writes (e.g. its groupBy columns)"
        )
    columns = yt_schema(arrow, list(key))
    for column in columns:  # a row without its key has nothing to replace
        if column["name"] in key:
            column["required"] = True
    return columns


def create_output_table(
    client: Any,
    path: str,
    schema: Any,
    *,
    key: Sequence[str] = (),
    queue_id: bool = False,
    tablet_index_column: str = "tablet_index",
    row_index_column: str = "row_index",
    queue_id_column: str = "queue_id",
    extra_key: Sequence[str] = (),
    attributes: dict[str, Any] | None = None,
    mount: bool = True,
) -> list[dict[str, Any]]:
    """Create ``path`` as a sorted dynamic table for this sink and mount it; returns its schema.

    ``schema`` is the schema of the rows the query writes (a pyarrow schema, a Spark
    ``StructType`` or the streaming DataFrame itself); SPYT's service columns become
    ``tablet_index_column``/``row_index_column``. With ``queue_id=True`` the key starts with
    ``queue_id_column`` (several queues into one table). ``extra_key`` adds key columns after the
    row index, for queries that legitimately turn one source row into several (e.g. posexplode).
    An existing table is left as it is (then the sink's checks tell whether it fits).

    ``key`` (the transactional mode): the table is keyed by exactly these columns of the rows
    instead, e.g. an aggregation's groupBy columns (the source coordinates are not added).
    """
    if key:
        columns = keyed_columns(schema, key)
    else:
        columns = output_columns(
            schema,
            queue_id=queue_id,
            tablet_index_column=tablet_index_column,
            row_index_column=row_index_column,
            queue_id_column=queue_id_column,
            extra_key=extra_key,
        )
    ensure_dynamic_table(client, path, columns, attributes=attributes, mount=mount)
    return columns


def ensure_dynamic_table(
    client: Any,
    path: str,
    columns: Sequence[dict[str, Any]],
    *,
    attributes: dict[str, Any] | None = None,
    mount: bool = True,
) -> None:
    """Create the sorted dynamic table if missing (races are fine) and mount it."""
    if not client.exists(path):
        client.create(
            "table",
            path,
            recursive=True,
            ignore_existing=True,
            attributes={"dynamic": True, "schema": _yson_schema(columns), **(attributes or {})},
        )
        log.info("yt_dynamic.table_created", path=path)
    if mount:
        mount_table(client, path)


def ensure_aux_table(
    client: Any, path: str, columns: Sequence[dict[str, Any]], *, create: bool = True
) -> bool:
    """Check the layout of an aux table of the sink and mount it, creating it if ``create``.

    Returns whether the table exists. A table with another key (made by an earlier version of
    the sink) is refused with the fix, rather than failing on its first read or write.
    """
    if not client.exists(path):
        if create:
            ensure_dynamic_table(client, path, columns)
        return create
    key = [c["name"] for c in client.get(f"{path}/@schema") if c.get("sort_order")]
    expected = [c["name"] for c in columns if c.get("sort_order")]
    if key != expected:
        raise ConfigurationError(
            f"table {path} is keyed by {key}, but this version of the sink keys it by "
            f"{expected}. Fix: remove it (`yt unmount-table --sync {path} && yt remove "
            f"{path}`): the sink creates it again; losing it costs only rewriting the rows of "
            "batches that are replayed"
        )
    if create:
        mount_table(client, path)
    return True


def ql_string(value: str) -> str:
    """A string literal of YT's query language."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def mount_table(client: Any, path: str, timeout_s: float = 60.0) -> None:
    """Mount ``path`` and wait until every tablet is mounted (no-op when it is)."""
    deadline = time.monotonic() + timeout_s
    while True:
        state = client.get(f"{path}/@tablet_state")
        if state == "mounted":
            return
        if state == "unmounted":
            try:
                client.mount_table(path, sync=False)
            except Exception as exc:
                # another writer mounts it at the same moment: wait for that mount
                if not getattr(exc, "is_tablet_in_intermediate_state", lambda: False)():
                    raise
        if time.monotonic() > deadline:
            raise ConfigurationError(
                f"table {path} is still {state!r} after {timeout_s:.0f}s of mounting. Fix: check "
                f"the tablet cell bundle of the table, then `yt mount-table --sync {path}`"
            )
        time.sleep(0.05)


def inspect_output(client: Any, path: str) -> list[dict[str, Any]]:
    """The output table's schema, after checking it can serve as an idempotent receiver."""
    create_fix = (
        "create it with eosink_yt_dynamic.create_output_table(client, path, df) (or set the "
        "sink option create_table=true)"
    )
    if not client.exists(path):
        raise ConfigurationError(f"output table {path} does not exist. Fix: {create_fix}")
    node_type = client.get(f"{path}/@type")
    if node_type != "table":
        raise ConfigurationError(f"{path} is a {node_type}, not a table. Fix: {create_fix}")
    if not client.get(f"{path}/@dynamic"):
        raise ConfigurationError(
            f"output table {path} is a static table: upserts need a sorted dynamic table. Fix: "
            f"convert it (`yt alter-table --dynamic {path}` on a sorted table with unique keys, "
            f"then mount it) or write to a new table; {create_fix}"
        )
    schema = client.get(f"{path}/@schema")
    key = [c["name"] for c in schema if c.get("sort_order")]
    if not key:
        raise ConfigurationError(
            f"output table {path} is an ordered dynamic table (a queue, no key columns): rows "
            f"would be appended, never overwritten, so replays duplicate them. Fix: {create_fix}"
        )
    attributes = getattr(schema, "attributes", {}) or {}
    if not attributes.get("unique_keys", False):
        raise ConfigurationError(
            f"output table {path}: its schema lacks unique_keys=%true, so a key does not name "
            f"one row. Fix: {create_fix}"
        )
    state = client.get(f"{path}/@tablet_state")
    if state != "mounted":
        raise ConfigurationError(
            f"output table {path} is {state!r}, not mounted: nothing can be upserted. Fix: "
            f"`yt mount-table --sync {path}` (or eosink_yt_dynamic.mount_table(client, path)), "
            f"or set the sink option create_table=true to have the sink mount it"
        )
    return list(schema)
