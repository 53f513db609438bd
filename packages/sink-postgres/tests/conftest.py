"""Shared fixtures of the eosink-postgres tests: one PostgreSQL server per test process, a
fresh database per test, and an independent reader (plain SQL)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

# The loopback PostgreSQL server: one for the session.
from eosink.testing.postgres import PostgresServer, postgres_server  # noqa: F401
from pg_helpers import admin, read_table


@pytest.fixture
def database(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's server; its superuser URL."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with admin(postgres_server.url()) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield postgres_server.url(database=name)
    with admin(postgres_server.url()) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture
def read_target(database: str):
    """Every row of a table of the test's database, read by plain SQL (not by the sink)."""
    return lambda table="public.events": read_table(database, table)
