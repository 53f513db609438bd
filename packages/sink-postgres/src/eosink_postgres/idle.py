"""The idle connections this process keeps for the sink's next hook or task.

A connection costs more than the statements of a small batch (a SCRAM exchange, TLS over a
network). On the driver a batch's ``is_committed``, ``init`` and ``commit`` run one after
another; on an executor, Spark's Python worker runs task after task, each with the sink
unpickled anew. So the process keeps one idle connection per connection string, whoever
opened it, and hands it to the next hook that asks for the same one. It is the process's state
(:func:`eosink.process.process_state`): the kit's simulated processes each keep their own, and
a simulated restart drops them.

A kept connection is handed out only if it is usable (not closed or broken, nothing sent by
the server while it was idle: a restart or a terminated backend announces itself) and only in
the process that opened it: Spark's daemon forks its workers, and a child closing its parent's
socket would end the parent's session. A connection is kept only outside a transaction.
"""

from __future__ import annotations

import os
import select
import threading
from typing import Any

import psycopg

from eosink.process import process_state

_lock = threading.Lock()
#: A forked child's inherited connections: held, never used, so that collecting them does
#: not warn of open connections (their sockets stay the parent's).
_inherited: list[psycopg.Connection[Any]] = []


def _kept() -> dict[str, tuple[int, psycopg.Connection[Any]]]:
    """This process's kept connections by connection string, with the pid that opened each
    (a process of the kit's simulation has its own: :mod:`eosink.process`)."""
    return process_state("eosink_postgres.idle")


def take(conninfo: str) -> psycopg.Connection[Any] | None:
    """The kept connection for ``conninfo`` if there is a usable one (it is then no longer
    kept: one user at a time), else None."""
    with _lock:
        pid, conn = _kept().pop(conninfo, (None, None))
        if conn is not None and pid != os.getpid():  # a forked child: the parent's
            _inherited.append(conn)
            return None
    if conn is not None and stale(conn):
        conn.close()
        return None
    return conn


def give(conninfo: str, conn: psycopg.Connection[Any]) -> None:
    """Keep ``conn`` for the next ``take`` of ``conninfo`` if it is healthy and outside a
    transaction; close it otherwise (or if one is kept already)."""
    idle = psycopg.pq.TransactionStatus.IDLE
    if conn.closed:
        return
    if conn.broken or conn.info.transaction_status != idle:
        conn.close()
        return
    with _lock:
        kept = _kept()
        if conninfo not in kept:
            kept[conninfo] = (os.getpid(), conn)
            return
    conn.close()


def stale(conn: psycopg.Connection[Any]) -> bool:
    """Whether a kept connection is unusable: closed, broken, or with something to read while
    idle (the server ended the session: a restart, a terminated backend)."""
    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
