"""End to end with a real kill, Spark's ``update`` output mode: a streaming aggregation (per
``id % 7``: count, sum of ids, greatest name) upserted by its key through foreachBatch into an
Iceberg table, the query's process group killed (SIGKILL) in the middle of its third batch and
started again from its checkpoint. The table, read by pyiceberg and by DuckDB's iceberg
extension, equals the aggregation computed once over all input: each key's latest row, never a
batch's changes applied twice or lost."""

from __future__ import annotations

import os

from iceberg_helpers import duckdb_missing, read_duckdb, read_pyiceberg

from eosink.testing.killed_query import QueryJob, QueryProcesses, totals_job
from eosink.testing.replay import source_records, totals_of, write_json_source

TABLE = "lake.user_totals"


def catalog_of(work) -> dict[str, str]:
    """A SQL catalog on SQLite in ``work``."""
    os.makedirs(os.path.join(work, "warehouse"), exist_ok=True)
    return {
        "type": "sql",
        "uri": f"sqlite:///{work}/catalog.db",
        "warehouse": f"file://{work}/warehouse",
    }


def held(catalog):
    """The table's rows by key, read by pyiceberg; DuckDB (where it loads) reads the same."""
    readers = [read_pyiceberg] + ([read_duckdb] if duckdb_missing() is None else [])
    seen = []
    for read in readers:
        rows = read(catalog, TABLE).to_pylist()
        by_key = {r["user_id"]: (r["n"], r["total"], r["last"]) for r in rows}
        assert len(by_key) == len(rows), "a key is held twice"
        seen.append(by_key)
    assert all(s == seen[0] for s in seen)
    return seen[0]


def test_update_mode_aggregation_killed_mid_batch_and_restarted(tmp_path, iceberg_entry_point):
    write_json_source(tmp_path / "in")
    after_two = totals_of(source_records(tmp_path / "in", 2))
    catalog = catalog_of(str(tmp_path))
    options = {
        "table": TABLE,
        "catalog": catalog,
        "create_namespace": True,
        "mode": "upsert",
        "key": ["user_id"],
    }
    job = totals_job("iceberg", options, tmp_path / "in")
    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)
        assert held(catalog) == after_two  # two batches committed, the third not at all
        queries.restart(job)
    assert held(catalog) == totals_of(source_records(tmp_path / "in", 4))


def source_options(catalog) -> dict[str, str]:
    return {
        "path": TABLE,
        "createNamespace": "true",
        "mode": "upsert",
        "key": "id",
        **{f"catalog.{key}": value for key, value in catalog.items()},
    }


def test_the_data_source_door_upserts_an_append_stream_killed_and_restarted(
    tmp_path, iceberg_entry_point
):
    """A change feed through ``format("eosink-iceberg")`` with ``mode``/``key`` options:
    every file (batch) carries ids 0..299 again with new names; killed mid third batch, the
    table holds the second file's rows, and after the restart the last file's."""
    write_json_source(tmp_path / "in", row=lambda n, i: {"id": i, "name": f"r{n}-{i}"})
    catalog = catalog_of(str(tmp_path))
    job = QueryJob(
        sink="iceberg",
        door="data_source",
        writer_id="feed",
        source_options=source_options(catalog),
        stall={"id": 150, "name": "r2-150"},
    )

    def names():
        rows = read_pyiceberg(catalog, TABLE).to_pylist()
        by_id = {r["id"]: r["name"] for r in rows}
        assert len(by_id) == len(rows), "a key is held twice"
        if duckdb_missing() is None:
            other = read_duckdb(catalog, TABLE).to_pylist()
            assert sorted((r["id"], r["name"]) for r in other) == sorted(by_id.items())
        return by_id

    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(job)
        assert names() == {i: f"r1-{i}" for i in range(300)}
        queries.restart(job)
    assert names() == {i: f"r3-{i}" for i in range(300)}
