"""The postgres sink passes the kit's generated histories (:mod:`eosink.testing.simulation`),
judged by plain SQL (``SELECT * FROM target`` over psycopg), never by the sink's own code.

Each history writes a fresh table of one database on the session's server; what a history
draws besides the kit's dimensions (writers, crashes at every protocol point, zombies, commits
from fresh workers, cleanup, the clock): the sink's mode (append, or upsert keyed by the
kit's key column, whose values later batches carry again, on a table the sink makes with that
primary key), and store faults: the
connection to the server cut before a statement reaches it, or after the server carried it
out and before its reply arrives (a lost COMMIT reply among them), by the loopback proxy of
:mod:`pg_faults`. The damage a careless user does: a column dropped by hand. The judge also
reads with filters (a plain ``SELECT ... WHERE``, :func:`read_where`), and data columns hold
the kit's wide values.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from collections.abc import Mapping
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from eosink_postgres.sink import PostgresSink
from hypothesis import strategies as st
from pg_faults import FaultProxy
from pg_foreign import postgres_foreign_steps, reset_encoding
from pg_helpers import admin, read_table
from psycopg import sql

from eosink.testing.arrow_data import COLUMN_TYPES, ODD_STRINGS
from eosink.testing.simulation import (
    ForeignStep,
    HistorySpec,
    Predicate,
    Script,
    SimTarget,
    SinkSimulation,
)

#: Every type of the kit: the type map has a PostgreSQL type for each.
POSTGRES_TYPES = tuple(COLUMN_TYPES)


def _text() -> st.SearchStrategy[str]:
    """The kit's strings without NUL, which PostgreSQL text cannot hold (the sink refuses it
    with a clear error: test_bad_input.py)."""
    return st.one_of(
        st.sampled_from(ODD_STRINGS),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
    )


def read_where(
    url: str, table: str, spec: HistorySpec, predicate: Predicate
) -> list[dict[str, Any]]:
    """The rows of ``table`` a plain ``SELECT ... WHERE`` returns (the server's indexes and
    plans, not a scan filtered here); text compares byte by byte (``COLLATE "C"``), as the
    kit orders strings, not by the database's collation."""
    schema, name = table.split(".")
    column = sql.Identifier(predicate.column)
    if pa.types.is_string(spec.schema.field(predicate.column).type):
        column = sql.SQL('{} COLLATE "C"').format(column)
    if predicate.op == "is_null":
        where, params = sql.SQL("{} IS NULL").format(column), ()
    elif predicate.op == "eq":
        where, params = sql.SQL("{} = %s").format(column), (predicate.value,)
    else:
        where = sql.SQL("{} BETWEEN %s AND %s").format(column)
        params = (predicate.value, predicate.high)
    query = sql.SQL("SELECT * FROM {} WHERE {}").format(sql.Identifier(schema, name), where)
    with psycopg.connect(url, autocommit=True, client_encoding="UTF8") as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0]
        if exists is None:
            return []
        cur = conn.execute(query, params)
        names = [d.name for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


class TestPostgresSimulation(SinkSimulation):
    simulation_types = POSTGRES_TYPES
    # The kit's 25 steps: with 12, two histories in three wrote no row (random seeds; with 25,
    # about two in five: hypothesis' swarm testing turns run and begin both off in about a
    # third). 24 examples (6 examples of 12 steps wrote rows in 4 histories, none keyed), in
    # ~20-30 s: the fault proxy no longer waits for delayed ACKs (~40 ms a statement: pg_faults).
    simulation_examples = 24
    simulation_steps = 25
    simulation_wide_values = True
    simulation_upsert_key = "key_int64"
    #: The database and table of each target made (its foreign steps act on them).
    tables: dict[int, tuple[str, str]] = {}
    #: The sink under test (a test of the simulation's teeth swaps in a broken one).
    sink_class: type[PostgresSink] = PostgresSink
    simulation_values = {
        "string": _text(),
        "struct": st.fixed_dictionaries({"a": st.integers(-5, 5), "b": _text()}),
    }

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.sampled_from([{}, {"mode": "upsert", "key": "key_int64"}])

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

        sink_class = self.sink_class
        target = SimTarget(
            sink=lambda: sink_class(url=proxy.url, table=table, **spec.options),
            read=lambda: read_table(database, table),
            store=proxy,
            damage=damage,
            filtered={"SQL WHERE": lambda p: read_where(database, table, spec, p)},
            close=lambda: reset_encoding(database),
        )
        self.tables[id(target)] = (database, table)
        return target

    def simulation_foreign_steps(
        self, spec: HistorySpec, target: SimTarget
    ) -> Mapping[str, ForeignStep]:
        """Another application's INSERT, ``VACUUM FULL``, a LATIN1 session default
        (``pg_foreign``), on the table ``read`` reads."""
        database, table = self.tables.pop(id(target))
        return postgres_foreign_steps(spec, database, table)


def test_seed_2248293131_a_real_read_back_as_text_is_the_float32_written(database: str) -> None:
    """Found by a soak (seed 2248293131), shrunk: a float32 column holding 1e20 beside a
    decimal column (so the batch went row by row). The batch wrote the float32 nearest 1e20
    (``1.0000000200408773e+20``) and the server holds exactly it (``r::float8`` says so, as
    does a binary read); a plain SELECT gives a ``real`` as the shortest text that reads back
    as that float32, ``1e+20``, which Python parses as the double 1e20. The kit compared that
    double with the float32: the kit's error, not the sink's. The judge now compares float32
    columns a reader gives as Python values at float32 precision."""
    kit = TestPostgresSimulation()
    kit.simulation_upsert_key = None  # the history as it was found: no key column
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("c0_float32", pa.float32()),
            pa.field("c1_decimal", pa.decimal128(12, 3)),
        ]
    )
    batch = pa.record_batch(
        [
            pa.array([0, 1], pa.int64()),
            pa.array([1e20, -1e20], pa.float32()),
            pa.array([Decimal("1.500"), None], pa.decimal128(12, 3)),
        ],
        schema=schema,
    )
    with FaultProxy(database) as proxy:
        history = kit.history_machine((database, proxy))()
        history.start(Script((schema, ()), 1, {}))
        history.run(Script(history.writers[0], [2], batch, None), batches=1)
        history.check_rows()
        history.teardown()


class InheritedEncodingSink(PostgresSink):
    """Broken on purpose, as the sink was before it set its sessions' encoding: every
    connection speaks the database's default ``client_encoding``, which the binary COPY
    encoder ignores (it sends UTF-8 whatever the session says)."""

    def _take(self, autocommit: bool) -> psycopg.Connection[Any]:
        conn = super()._take(autocommit)
        default = conn.execute(
            "SELECT split_part(c, '=', 2) FROM pg_db_role_setting s, unnest(s.setconfig) c"
            " WHERE s.setrole = 0 AND c LIKE 'client_encoding=%%' AND s.setdatabase ="
            " (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
        if default is not None:
            conn.execute(sql.SQL("SET client_encoding = {}").format(sql.Literal(default[0])))
        if not autocommit:
            conn.commit()
        return conn


class Latin1Simulation(TestPostgresSimulation):
    """The kit's histories on a database whose sessions default to LATIN1 from the start (the
    foreign step ``latin1_sessions`` taken first), with only string columns holding what
    LATIN1 holds and ASCII does not. In the kit's own mix the step is one of three, drawn in
    about one history of three, often after the last batch with rows; a soak finds the
    defect there (the closing note of issue 34 names the seeds)."""

    __test__ = False
    simulation_examples = 10
    simulation_wide_values = False
    simulation_types = ("string",)
    simulation_upsert_key = None
    simulation_values = {**TestPostgresSimulation.simulation_values, "string": st.just("Größe")}

    def simulation_options(self) -> st.SearchStrategy[dict[str, Any]]:
        return st.just({})

    def simulation_target(self, spec: HistorySpec, env: Any) -> SimTarget:
        target = super().simulation_target(spec, env)
        database, table = self.tables[id(target)]
        postgres_foreign_steps(spec, database, table)["latin1_sessions"](None)
        return target


def test_a_latin1_default_encoding_in_the_histories_catches_a_sink_that_inherits_it(
    database: str,
) -> None:
    """The simulation's teeth for the session's encoding (CI's fixed seed, no shrinking): a
    sink that leaves its sessions the database's LATIN1 stores mojibake, which the judge
    reads as changed values. (The sink itself meets a LATIN1 default in the kit's own
    histories, and in every path of ``test_session_settings.py``.)"""
    kit = Latin1Simulation()
    kit.sink_class = InheritedEncodingSink
    with FaultProxy(database) as proxy:
        with pytest.raises(AssertionError, match="changed values"):
            kit.run_histories_unshrunk((database, proxy))
