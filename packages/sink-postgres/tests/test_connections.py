"""How the sink's sessions are spent: a task's sink arrives unpickled, without a connection,
and Spark's Python workers run task after task; a connection costs more than a small task's
statements (a SCRAM exchange, TLS over a network), so a process keeps its idle one for the
next task. Counted by the server (``pg_stat_database.sessions``)."""

from __future__ import annotations

import multiprocessing
import time

import psycopg
from eosink_postgres.sink import PostgresSink
from pg_helpers import admin, batch_rows, expected_ids, ids, read_table, run


def sessions(url: str) -> int:
    """The sessions established to ``url``'s database so far (this one's included)."""
    with admin(url) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        (n,) = conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(n)


def test_the_tasks_of_one_process_share_its_idle_connection(database):
    """Five batches of four tasks each (every task's sink unpickled, as on an executor): one
    session for the driver's hooks and the tasks together, not one per task."""
    run(PostgresSink(url=database, table="events"), 0, batch_rows(0, partitions=4))
    before = sessions(database)
    data = [batch_rows(b, partitions=4) for b in range(1, 6)]
    for b, parts in enumerate(data, start=1):
        assert run(PostgresSink(url=database, table="events"), b, parts).status == "committed"
    # the counting sessions themselves: one before, one after
    assert sessions(database) - before <= 2
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(0, partitions=4), *data])


def _batch_in_child(url: str, batch: int) -> None:
    run(PostgresSink(url=url, table="events"), batch, batch_rows(batch))


def test_a_forked_process_opens_its_own_and_leaves_the_parents_alone(database):
    """Spark's daemon forks its Python workers: a child never uses (nor closes) the idle
    connection it inherited, and the parent's still works after the child ended."""
    run(PostgresSink(url=database, table="events"), 0, batch_rows(0))
    child = multiprocessing.get_context("fork").Process(target=_batch_in_child, args=(database, 1))
    child.start()
    child.join(120)
    assert child.exitcode == 0
    before = sessions(database)
    assert run(PostgresSink(url=database, table="events"), 2, batch_rows(2)).status == "committed"
    assert sessions(database) - before <= 1  # the counting session: the kept one still served
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(b) for b in range(3)])


def test_a_connection_the_server_ended_is_not_reused(database):
    """The server ends the idle session (``idle_session_timeout``, an administrator): the next
    task opens a new one instead of failing."""
    run(PostgresSink(url=database, table="events"), 0, batch_rows(0))
    with admin(database) as conn:
        ended = [
            pid
            for (pid,) in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'eosink-postgres' "
                "AND datname = current_database()"
            ).fetchall()
        ]
        assert ended
        conn.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) pid", (ended,))
        deadline = time.monotonic() + 30
        while conn.execute(  # ended: its farewell is on the socket
            "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (ended,)
        ).fetchone():
            assert time.monotonic() < deadline
            time.sleep(0.02)
    assert run(PostgresSink(url=database, table="events"), 1, batch_rows(1)).status == "committed"
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(b) for b in range(2)])
    with psycopg.connect(database) as conn:  # nothing of the batch left half-done
        (n,) = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'eosink-postgres'"
            " AND state <> 'idle'"
        ).fetchone()
    assert n == 0
