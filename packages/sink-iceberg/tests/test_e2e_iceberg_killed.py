"""End to end with a real kill: the driver process gets SIGKILL in the middle of a batch.

One task of the batch has written its Parquet file into the table's data folder, the other
stalls; the whole process group is killed; the query is started again from the same
checkpoint. The table, read by pyiceberg and by DuckDB's iceberg extension, holds exactly the
source rows; the proof property says batch 3; the killed attempt's file is an orphan no
snapshot lists, which ``eosink cleanup iceberg`` finds (dry run), then removes.
"""

from __future__ import annotations

import datetime as dt
import os

import pytest
from eosink_iceberg.proof import StoredProof, property_key
from iceberg_helpers import duckdb_missing, load, read_duckdb, read_pyiceberg

from eosink import cli
from eosink.testing.killed_query import QueryJob, QueryProcesses
from eosink.testing.replay import FILES, assert_exactly, default_row, write_json_source

TABLE = "lake.orders"
SCHEMA = "id long, name string, ts timestamp"


def catalog_of(work) -> dict[str, str]:
    """A SQL catalog on SQLite in ``work``."""
    os.makedirs(os.path.join(work, "warehouse"), exist_ok=True)
    return {
        "type": "sql",
        "uri": f"sqlite:///{work}/catalog.db",
        "warehouse": f"file://{work}/warehouse",
    }


def timestamped(n, i):
    return {**default_row(n, i), "ts": dt.datetime(2024, 1, 1 + n, i % 24).isoformat()}


def job(work, door) -> QueryJob:
    options = catalog_of(work)
    return QueryJob(
        sink="iceberg",
        door=door,
        schema=SCHEMA,
        sink_options={
            "table": TABLE,
            "catalog": options,
            "create_namespace": True,
            "partition_by": ["day(ts)", "bucket(4, id)"],
        },
        source_options={
            "path": TABLE,
            "createNamespace": "true",
            "partitionBy": "day(ts), bucket(4, id)",
            **{f"catalog.{key}": value for key, value in options.items()},
        },
    )


def proof_batch(catalog) -> int:
    text = load(catalog, TABLE).metadata.properties[property_key("orders")]
    return StoredProof.from_json(text).proof.batch_id


def data_files(work) -> set[str]:
    folder = os.path.join(work, "warehouse")
    return {n for _, _, names in os.walk(folder) for n in names if n.endswith(".parquet")}


@pytest.mark.parametrize("door", ["foreach_batch", "data_source"])
def test_query_killed_mid_batch_and_restarted(tmp_path, door, iceberg_entry_point, capsys):
    expected = write_json_source(tmp_path / "in", row=timestamped)
    query = job(str(tmp_path), door)
    with QueryProcesses(tmp_path) as queries:
        queries.kill_mid_batch(query)
        catalog = catalog_of(str(tmp_path))
        assert proof_batch(catalog) == 1
        on_disk_before = data_files(tmp_path)
        queries.restart(query)
    readers = [read_pyiceberg] + ([read_duckdb] if duckdb_missing() is None else [])
    for read in readers:
        assert_exactly(read(catalog, TABLE).column("id").to_pylist(), expected)
    assert proof_batch(catalog) == FILES - 1
    table = load(catalog, TABLE)
    listed = {t.file.file_path.rsplit("/", 1)[-1] for t in table.scan().plan_files()}
    orphans = on_disk_before - listed
    assert orphans, "the killed attempt left its written file behind"
    # the operator's cleanup: a dry run lists the orphans, --delete removes them, reads unchanged
    command = ["cleanup", "iceberg", TABLE, "--older-than", "0s"]
    for key, value in catalog.items():
        command += ["-o", f"catalog.{key}={value}"]
    assert cli.main(command) == 0
    dry = capsys.readouterr().out
    assert all(name in dry for name in orphans), dry
    assert data_files(tmp_path) >= orphans
    assert cli.main([*command, "--delete"]) == 0
    assert not data_files(tmp_path) & orphans
    held = read_pyiceberg(catalog, TABLE).column("id").to_pylist()
    assert sorted(held) == sorted(expected)
