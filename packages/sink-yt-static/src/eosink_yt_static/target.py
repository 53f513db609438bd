"""The target table as every step of the tree sees it: what it is, its schema, its
attributes (the proofs among them: :mod:`eosink_yt_static.proof`)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from eosink.plugin import ConfigurationError
from eosink_yt_common import key_columns, yt_schema
from eosink_yt_static import tx as txs
from eosink_yt_static.proof import PROOFS_ATTR

#: Attributes of the target that staging tables (and so a table that replaces it) inherit.
INHERITED_ATTRS = ("compression_codec", "erasure_codec", "optimize_for", "replication_factor")


def split(path: str) -> tuple[str, str]:
    """The parent folder and the name of a Cypress path."""
    parent, _, name = path.rstrip("/").rpartition("/")
    return parent or "/", name


def attributes(client: Any, path: str, tx: str | None = None) -> dict[str, Any] | None:
    """The table's attributes as seen in ``tx`` (committed with ``None``); ``None`` if missing."""
    from yt.wrapper.errors import YtResponseError

    try:
        with txs.in_tx(client, tx):
            node = client.get(
                path,
                attributes=[
                    "type",
                    "dynamic",
                    "schema",
                    "row_count",
                    "unique_keys",
                    PROOFS_ATTR,
                    *INHERITED_ATTRS,
                ],
            )
    except YtResponseError as exc:
        if exc.is_resolve_error():
            return None
        raise
    return dict(getattr(node, "attributes", {}) or {})


def check_static(path: str, attrs_: dict[str, Any] | None) -> None:
    if attrs_ is None:
        return
    if attrs_.get("type") != "table":
        raise ConfigurationError(
            f"{path} is a {attrs_.get('type')}, not a table: point option path at a static table "
            "or at a path where the sink may create one"
        )
    if attrs_.get("dynamic"):
        raise ConfigurationError(
            f"{path} is a dynamic table; the yt-static sink writes static tables only (a "
            "transaction tree per batch). For dynamic tables use the yt-dynamic sink (format "
            "'eosink-yt-dynamic', the idempotent receiver), or point option path at a static table"
        )


def final_schema(
    path: str,
    schema: pa.Schema,
    target: dict[str, Any] | None,
    cleanup: str,
    wanted_keys: tuple[str, ...],
) -> list[dict[str, Any]]:
    """The schema of the table the batch ends in (with its key columns): the table's own when
    it exists (the data must match it), else one from the data."""
    wanted = list(wanted_keys)
    existing = [c for c in ((target or {}).get("schema") or []) if isinstance(c, dict)]
    strict = bool(existing) and str(
        getattr(target["schema"], "attributes", {}).get("strict", True)  # type: ignore[index]
    ).lower() not in ("false", "%false")
    if cleanup == "drop" or not strict:
        keys = wanted or (key_columns(existing) if strict else [])
        return yt_schema(schema, keys)
    names = [c["name"] for c in existing]
    if sorted(names) != sorted(schema.names):
        missing = sorted(set(names) - set(schema.names))
        extra = sorted(set(schema.names) - set(names))
        raise ConfigurationError(
            f"{path} has columns {names} but the data has {schema.names} "
            f"(missing {missing}, unknown {extra}): select the table's columns in the query, "
            "write to another path, or use cleanup='drop' to replace the table with the new schema"
        )
    keys = key_columns(existing)
    if wanted and wanted != keys:
        raise ConfigurationError(
            f"option key_columns={wanted} but {path} is keyed by {keys}: drop the option (the "
            "table's keys are used) or write to another path"
        )
    ours = {c["name"]: c["type"] for c in yt_schema(schema)}
    for column in existing:
        if not _compatible(ours[column["name"]], column.get("type", "any")):
            raise ConfigurationError(
                f"column {column['name']!r} is {column.get('type')} in {path} but "
                f"{ours[column['name']]} in the data: cast it in the query "
                f"(e.g. col('{column['name']}').cast(...)) to match the table"
            )
    return [
        {k: v for k, v in c.items() if k in ("name", "type", "sort_order", "required")}
        for c in existing
    ]


_FAMILIES = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint8": "uint",
    "uint16": "uint",
    "uint32": "uint",
    "uint64": "uint",
    "float": "double",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "utf8": "string",
    "date": "date",
    "timestamp": "timestamp",
}


def _compatible(ours: str, theirs: str) -> bool:
    if theirs in ("any", "yson"):
        return True
    return _FAMILIES.get(ours, ours) == _FAMILIES.get(theirs, theirs)
