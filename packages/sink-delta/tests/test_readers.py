"""Every commit eosink writes reads back the same in three independent Delta readers.

delta-rs (``deltalake``), delta-kernel-rs (through ``polars-deltalake``) and DuckDB's delta
extension read the table eosink's own commits built: the rows, the partition values (the odd
ones: a space, ``%``, ``/``, ``=``, non-ASCII and beyond the BMP, the empty string, null), the
txn (where the reader shows one), and the stats (a filter on a column's value must find its row
in each reader, which prunes files by their min/max), from the commit files and from the checkpoints
written at the table's ``delta.checkpointInterval`` with the commits before them gone.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from typing import Any

import polars_deltalake
import pyarrow as pa
import pytest
from add_paths import ODD_VALUES
from deltalake import DeltaTable
from delta_helpers import duckdb_with_delta, log_actions, run
from eosink_delta.log_commit import ENGINE_INFO
from eosink_delta.sink import DeltaSink

BATCHES = 6
#: The odd values, and a character outside Unicode's BMP (a surrogate pair in escaped JSON).
VALUES = [*ODD_VALUES, "\U0001f600x", "\U000a7b2b"]


def batch_rows(batch: int) -> pa.RecordBatch:
    """One row per odd partition value, with a double and a timestamp column."""
    n = len(VALUES)
    ids = [batch * 100 + i for i in range(n)]
    return pa.record_batch(
        {
            "id": pa.array(ids, pa.int64()),
            "x": pa.array([i / 4 if i % 5 else None for i in ids], pa.float64()),
            "at": pa.array([i * 1_000_003 for i in ids], pa.timestamp("us", tz="UTC")),
            "s": pa.array(VALUES),  # the same text in a data column: its min/max stats
            "p": pa.array(VALUES),
        }
    )


def expected() -> list[tuple[Any, ...]]:
    out = []
    for batch in range(BATCHES):
        for row in batch_rows(batch).to_pylist():
            p = None if row["p"] == "" else row["p"]  # the protocol reads "" as null
            out.append((row["id"], row["x"], row["at"].timestamp(), row["s"], p))
    return sorted(out, key=lambda r: r[0])


def normalized(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = []
    for r in rows:
        at = r["at"]
        if at.tzinfo is None:  # a reader that drops the zone still holds UTC instants
            at = at.replace(tzinfo=__import__("datetime").timezone.utc)
        x = r["x"]
        x = None if x is None or (isinstance(x, float) and math.isnan(x)) else x
        out.append((r["id"], x, at.timestamp(), r["s"], r["p"]))
    return sorted(out, key=lambda r: r[0])


def read_delta_rs(path: str, where: str | None = None) -> list[tuple[Any, ...]]:
    table = DeltaTable(path).to_pyarrow_table()
    if where is not None:
        from deltalake import QueryBuilder

        query = QueryBuilder().register("t", DeltaTable(path))
        table = pa.table(query.execute(f"select * from t where {where}").read_all())
    return normalized(table.to_pylist())


def read_kernel(path: str, where: str | None = None) -> list[tuple[Any, ...]]:
    frame = polars_deltalake.scan_delta(path)
    if where is not None:
        frame = frame.sql(f"select * from self where {where}")
    return normalized(frame.collect().to_dicts())


def read_duckdb(path: str, where: str | None = None) -> list[tuple[Any, ...]]:
    con = duckdb_with_delta()
    query = f"select id, x, \"at\", s, p from delta_scan('{path}')"
    if where is not None:
        query += f" where {where}"
    cursor = con.execute(query)
    names = [d[0] for d in cursor.description]
    return normalized([dict(zip(names, row)) for row in cursor.fetchall()])


READERS = {"delta-rs": read_delta_rs, "delta-kernel-rs": read_kernel, "duckdb": read_duckdb}


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> str:
    """A table whose every data commit eosink wrote itself, with checkpoints every 3 commits."""
    path = str(tmp_path_factory.mktemp("readers") / "table")
    sink = DeltaSink(path=path, partition_by=("p",))
    assert run(sink, 0, [batch_rows(0)]).status == "committed"  # version 1, on a new table
    DeltaTable(path).alter.set_table_properties({"delta.checkpointInterval": "3"})  # 2
    for batch in range(1, BATCHES):  # versions 3..7, eosink's view reads the change above
        assert run(sink, batch, [batch_rows(batch)]).status == "committed"
    return path


def test_the_commits_are_eosinks_own_and_checkpointed(written):
    infos = [a["commitInfo"] for v, a in log_actions(written) if "commitInfo" in a and v > 2]
    assert len(infos) == BATCHES - 1
    assert {i.get("engineInfo") for i in infos} == {ENGINE_INFO}
    logs = os.path.join(written, "_delta_log")
    checkpoints = sorted(n for n in os.listdir(logs) if ".checkpoint." in n)
    # 2: delta-rs' own, after the property change; 5: after eosink's commit, (5 + 1) % 3 == 0
    assert checkpoints == [f"{v:020d}.checkpoint.parquet" for v in (2, 5)]
    with open(os.path.join(logs, "_last_checkpoint")) as f:
        assert json.load(f)["version"] == 5


@pytest.mark.parametrize("reader", READERS)
def test_rows_and_partition_values_read_back_the_same(written, reader):
    assert READERS[reader](written) == expected()


@pytest.mark.parametrize("reader", READERS)
def test_stats_prune_no_row_away(written, reader):
    """A filter on each data column's value: a reader pruning files by wrong min/max (or a
    partition filter by a wrongly encoded value) would miss the row."""
    rows = expected()
    target = rows[len(rows) // 2 + 3]
    assert READERS[reader](written, f"id = {target[0]}") == [target]
    assert READERS[reader](written, "x > 2.0") == [r for r in rows if r[1] is not None and r[1] > 2]
    assert READERS[reader](written, "p = 'Zürich'") == [r for r in rows if r[4] == "Zürich"]
    far = VALUES[-1]  # beyond the BMP: found only if the stats hold it as written
    assert READERS[reader](written, f"s = '{far}'") == [r for r in rows if r[3] == far]


def test_stats_hold_each_files_counts_and_bounds(written):
    """delta-rs parses every add action's stats: numRecords, and min/max of the id column
    bound the ids each file holds."""
    adds = pa.table(DeltaTable(written).get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in adds) == len(expected())
    for add in adds:
        assert add["min.id"] <= add["max.id"]
        assert add["null_count.x"] in (0, 1)


def test_txn_reads_back(written):
    assert DeltaTable(written).transaction_version("w") == BATCHES - 1


@pytest.mark.parametrize("reader", READERS)
def test_read_from_the_checkpoint_alone(written, reader, tmp_path):
    """The commits before the checkpoint removed, as log cleanup does: every reader must take
    the checkpoint (written after eosink's commit) for them."""
    copy = str(tmp_path / "table")
    shutil.copytree(written, copy)
    for name in os.listdir(os.path.join(copy, "_delta_log")):
        if name.endswith(".json") and int(name.split(".")[0]) < 5:
            os.unlink(os.path.join(copy, "_delta_log", name))
    assert READERS[reader](copy) == expected()
    if reader == "delta-rs":
        assert DeltaTable(copy).transaction_version("w") == BATCHES - 1
