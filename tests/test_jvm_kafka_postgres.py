"""Kafka -> Spark -> eosink-postgres (foreachBatch door), the query's process killed in the
middle of a batch, a partition added and more records produced while it is down, then
restarted from its checkpoint (kafka_e2e.py). PostgreSQL, read by plain SQL,
holds every record exactly once."""

from __future__ import annotations

import uuid

import psycopg
import pytest
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
            return conn.execute(
                f"SELECT key, value, kafka_partition, kafka_offset FROM {TABLE}"
            ).fetchall()

    killed_and_restarted(kafka_broker, tmp_path, job, read)
