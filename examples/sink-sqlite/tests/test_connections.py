"""Connections to one database, opened at the same moment (as two attempts of a batch do)."""

from __future__ import annotations

import threading

from eosink_sqlite.sink import SqliteSink


def test_connections_opened_at_once_on_a_new_database_all_succeed(tmp_path):
    # Switching a new database to WAL takes a lock that SQLite does not wait for: two
    # connections doing it at once made one fail at once with "database is locked".
    errors: list[BaseException] = []

    def open_and_read(path: str) -> None:
        try:
            with SqliteSink(path=path).connect() as conn:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    for i in range(150):
        path = str(tmp_path / f"{i}.db")
        threads = [threading.Thread(target=open_and_read, args=(path,)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
