"""The postgres sink passes the kit's generated histories (:mod:`eosink.testing.simulation`),
judged by plain SQL (``SELECT * FROM target`` over psycopg), never by the sink's own code.

Each history writes a fresh table of one database on the session's server; what a history
draws besides the kit's dimensions (writers, crashes at every protocol point, zombies, commits
from fresh workers, cleanup, the clock): the sink's mode (append, or upsert keyed by the
source row's id, on a table the sink makes with that primary key), and store faults: the
connection to the server cut before a statement reaches it, or after the server carried it
out and before its reply arrives (a lost COMMIT reply among them), by the loopback proxy of
:mod:`pg_faults`. The damage a careless user does: a column dropped by hand.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from eosink_postgres.sink import PostgresSink
from hypothesis import strategies as st
from pg_faults import FaultProxy
from pg_helpers import admin, read_table

from eosink.testing.arrow_data import COLUMN_TYPES, ODD_STRINGS
from eosink.testing.simulation import HistorySpec, SimTarget, SinkSimulation

#: Every type of the kit: the type map has a PostgreSQL type for each.
POSTGRES_TYPES = tuple(COLUMN_TYPES)


def _text() -> st.SearchStrategy[str]:
    """The kit's strings without NUL, which PostgreSQL text cannot hold (the sink refuses it
    with a clear error: test_bad_input.py)."""
    return st.one_of(
        st.sampled_from(ODD_STRINGS),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
    )


class TestPostgresSimulation(SinkSimulation):
    simulation_types = POSTGRES_TYPES
    simulation_examples = 6
    simulation_steps = 12
    simulation_values = {
        "string": _text(),
        "struct": st.fixed_dictionaries({"a": st.integers(-5, 5), "b": _text()}),
    }

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.sampled_from([{}, {"mode": "upsert", "key": "id"}])

    @pytest.fixture
    def simulation_env(self, database: str) -> Any:
        with FaultProxy(database) as proxy:
            yield database, proxy

    def simulation_target(self, spec: HistorySpec, env: Any) -> SimTarget:
        database, proxy = env
        table = f"public.sim_{uuid.uuid4().hex[:10]}"
        proxy.reset()

        def damage() -> None:
            with admin(database) as conn:
                conn.execute(f"ALTER TABLE {table} DROP COLUMN id")

        return SimTarget(
            sink=lambda: PostgresSink(url=proxy.url, table=table, **spec.options),
            read=lambda: read_table(database, table),
            store=proxy,
            damage=damage,
        )
