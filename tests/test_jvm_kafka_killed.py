"""Kafka -> Spark -> eosink, the query's process killed in the middle of a batch, a partition
added and more records produced while it is down, restarted from its checkpoint, then run
again after a crash between the sink's commit and Spark's (kafka_e2e.py): eosink-postgres
through the foreachBatch door, read back by plain SQL, and eosink-delta through the data source
door, read back by delta-rs, each hold every record exactly once. One file, so that both share
one broker (a JVM test file is a process of its own)."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from deltalake import DeltaTable
from kafka_e2e import STREAM, kafka_spark, killed_and_restarted  # noqa: F401 - a fixture
from psycopg.rows import dict_row

from eosink.testing.killable_query import QueryJob
from eosink.testing.postgres import PostgresServer, postgres_server  # noqa: F401 - a fixture

TABLE = "public.events"


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
    def job(params, stall):
        return QueryJob(
            sink="postgres",
            door="foreach_batch",
            writer_id="kafka-events",
            sink_options={"url": database, "table": TABLE},
            stream=STREAM,
            params=params,
            stall=stall,
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

    def job(params, stall):
        return QueryJob(
            sink="delta",
            door="data_source",
            writer_id="kafka-events",
            source_options={"path": table},
            stream=STREAM,
            params=params,
            stall=stall,
        )

    def read():
        return DeltaTable(table).to_pyarrow_table().to_pylist()

    killed_and_restarted(kafka_broker, tmp_path, job, read)
