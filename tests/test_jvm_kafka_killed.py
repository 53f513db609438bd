"""Kafka -> Spark -> eosink, the query's process killed in the middle of a batch, a partition
added and more records produced while it is down, restarted from its checkpoint, then run
again after a crash between the sink's commit and Spark's (kafka_e2e.py): eosink-postgres
through the foreachBatch door, read back by plain SQL, and eosink-delta through the data source
door, read back by delta-rs, eosink-files through the data source door, read back by
spark_manifest_oracle (the files ``_spark_metadata`` lists, as Spark's reader finds them),
eosink-iceberg through the data source door, read back by pyiceberg, and eosink-yt-static
through the foreachBatch door into the emulated YT proxy, read back by the YT client, each hold
every record exactly once. One file, so that all share one broker (a JVM test file is a process
of its own)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from eosink_yt_emulator.kit import sink_options
from eosink_yt_emulator.pytest_plugin import yt_emulator  # noqa: F401 - a fixture
from kafka_e2e import STREAM, kafka_spark, killed_and_restarted  # noqa: F401 - a fixture
from psycopg.rows import dict_row
from pyiceberg.catalog import load_catalog
from spark_manifest_oracle import read_committed

from eosink.testing.killable_query import QueryJob
from eosink.testing.postgres import PostgresServer, postgres_server  # noqa: F401 - a fixture

TABLE = "public.events"


def kafka_job(sink: str, door: str, **options: Any) -> Callable[..., QueryJob]:
    """The query of every test here: the Kafka stream into ``sink`` through ``door``, with
    ``options`` (``sink_options`` or ``source_options``), as the harness runs it by round."""

    def job(params: Any, stall: Any) -> QueryJob:
        return QueryJob(
            sink=sink,
            door=door,
            writer_id="kafka-events",
            stream=STREAM,
            params=params,
            stall=stall,
            **options,
        )

    return job


@pytest.fixture
def database(postgres_server: PostgresServer):  # noqa: F811
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield postgres_server.url(database=name)
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_kafka_to_postgres_killed_mid_batch_and_restarted(
    kafka_broker, kafka_spark, database, tmp_path  # noqa: F811
):
    job = kafka_job(
        "postgres",
        "foreach_batch",
        sink_options={"url": database, "table": TABLE},
    )

    def read():
        with psycopg.connect(database, row_factory=dict_row) as conn:
            query = f"SELECT key, value, kafka_partition, kafka_offset FROM {TABLE}"
            return conn.execute(query).fetchall()

    killed_and_restarted(kafka_broker, tmp_path, job, read)


def test_kafka_to_delta_killed_mid_batch_and_restarted(
    kafka_broker, kafka_spark, tmp_path  # noqa: F811
):
    table = str(tmp_path / "table")

    job = kafka_job(
        "delta",
        "data_source",
        source_options={"path": table},
    )

    def read():
        return DeltaTable(table).to_pyarrow_table().to_pylist()

    killed_and_restarted(kafka_broker, tmp_path, job, read)


def test_kafka_to_files_killed_mid_batch_and_restarted(
    kafka_broker, kafka_spark, tmp_path  # noqa: F811
):
    out = str(tmp_path / "out")
    schema = pa.schema(
        [
            ("key", pa.string()),
            ("value", pa.string()),
            ("kafka_partition", pa.int32()),
            ("kafka_offset", pa.int64()),
        ]
    )

    job = kafka_job(
        "files",
        "data_source",
        source_options={"path": out},
    )

    def read():
        table, _ = read_committed(out, schema)
        return table.to_pylist()

    killed_and_restarted(kafka_broker, tmp_path, job, read)


def test_kafka_to_iceberg_killed_mid_batch_and_restarted(
    kafka_broker, kafka_spark, tmp_path  # noqa: F811
):
    (tmp_path / "warehouse").mkdir()
    catalog = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path}/catalog.db",
        "warehouse": f"file://{tmp_path}/warehouse",
    }
    table = "lake.events"

    job = kafka_job(
        "iceberg",
        "data_source",
        source_options={
            "path": table,
            "createNamespace": "true",
            **{f"catalog.{key}": value for key, value in catalog.items()},
        },
    )

    def read():
        # The SQL catalog keys its rows by the catalog's name: the sink's (catalogName) default.
        iceberg = load_catalog("eosink", **catalog)
        if not iceberg.table_exists(table):
            return []
        return iceberg.load_table(table).scan().to_arrow().to_pylist()

    killed_and_restarted(kafka_broker, tmp_path, job, read)


def test_kafka_to_yt_static_killed_mid_batch_and_restarted(
    kafka_broker, kafka_spark, yt_emulator, tmp_path  # noqa: F811
):
    path = "//home/eosink/events"
    yt = yt_emulator.client()

    job = kafka_job(
        "yt-static",
        "foreach_batch",
        # The killed batch's transactions die with their pinger: short timeouts, so the
        # restart does not wait long for its locks.
        sink_options={
            **sink_options(yt_emulator),
            "path": path,
            "main_tx_timeout_s": 15.0,
            "part_tx_timeout_s": 15.0,
        },
    )

    def read():
        return list(yt.read_table(path)) if yt.exists(path) else []

    killed_and_restarted(kafka_broker, tmp_path, job, read)
