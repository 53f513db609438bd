"""Partition values that need escaping, and the add paths delta-rs itself writes for them."""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake
from delta_helpers import log_actions

#: A space, the URI and Hive delimiters, non-ASCII, the empty string and null.
ODD_VALUES = ["United States", "a:b", "50%", "a/b", "k=v", "a%3Ab", "Zürich", "日本", "", None]


def odd_rows(values: list[str | None] = ODD_VALUES) -> pa.Table:
    return pa.table({"id": pa.array(range(len(values)), pa.int64()), "p": pa.array(values)})


def folders_by_value(table: str) -> dict[Any, str]:
    """Partition value -> the folder part of its add path, for every add action in the log."""
    out = {}
    for _version, action in log_actions(table):
        if "add" in action:
            add = action["add"]
            out[add["partitionValues"]["p"]] = add["path"].rsplit("/", 1)[0]
    return out


def delta_rs_folders(tmp: str, values: list[str | None] = ODD_VALUES) -> dict[Any, str]:
    """What delta-rs' own writer puts in the add paths of these values."""
    path = os.path.join(tmp, "written-by-delta-rs")
    write_deltalake(path, odd_rows(values), partition_by=["p"])
    return folders_by_value(path)
