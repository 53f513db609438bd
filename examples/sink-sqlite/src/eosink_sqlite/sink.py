"""A complete eosink sink on the standard library's ``sqlite3``: the worked example.

The pattern is the one every eosink sink follows:

* ``write`` (executors) stages a partition's rows where readers do not look: a staging table,
  each row tagged with the attempt that wrote it;
* ``commit`` (driver) moves the staged rows of the *successful* attempts into the target table
  and records the proof, in one SQLite transaction: readers see both or neither;
* ``is_committed`` reads the proof from the same database, so it can never disagree with the
  data;
* ``abort`` deletes staged rows of the attempt, which no reader ever saw.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
import uuid
from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa

from eosink_sqlite.cli import SqliteCommands
from eosink.plugin import (
    AlreadyCommitted,
    BatchContext,
    ConfigurationError,
    Proof,
    Sink,
    crash_point,
    hookimpl,
)

PROOFS = "_eosink_commits"
STAGING = "_eosink_staging"
ATTEMPT = "_eosink_attempt"


@attrs.frozen
class SqliteOptions:
    path: str
    table: str = "events"
    timeout_s: float = 30.0

    def __attrs_post_init__(self) -> None:
        if not self.table.replace("_", "").isalnum():
            raise ConfigurationError(f"table {self.table!r}: use letters, digits and underscores")


@attrs.frozen
class SqliteMessage:
    """One partition attempt's staged rows."""

    key: str
    rows: int


def sql_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_integer(arrow_type) or pa.types.is_boolean(arrow_type):
        return "INTEGER"
    if pa.types.is_floating(arrow_type):
        return "REAL"
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return "BLOB"
    return "TEXT"  # strings; timestamps and dates as ISO text


def _use_wal(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Switch the database to WAL (it stays so), retrying while another connection switches it.

    SQLite does not call the busy handler for the lock that changing the journal mode takes:
    two connections switching a new database at once made one fail at once with "database
    is locked", whatever the connection's timeout.
    """
    deadline = time.monotonic() + timeout_s
    while conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            conn.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _plain(value: Any) -> Any:
    return value.isoformat() if hasattr(value, "isoformat") else value


class SqliteSink(SqliteCommands, Sink):
    """Exactly-once into a SQLite table; data and proof commit in one transaction."""

    name = "sqlite"
    Options = SqliteOptions

    def connect(self) -> contextlib.closing[sqlite3.Connection]:
        """A connection in autocommit mode: transactions are explicit BEGIN ... COMMIT."""
        conn = sqlite3.connect(
            self.options.path, timeout=self.options.timeout_s, isolation_level=None
        )
        _use_wal(conn, self.options.timeout_s)
        return contextlib.closing(conn)

    # -- driver ----------------------------------------------------------------------------
    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        with self.connect() as conn:
            if not self._has_table(conn, PROOFS):
                return None
            row = conn.execute(
                f"SELECT proof FROM {PROOFS} WHERE writer_id = ? AND batch_id >= ? "
                "ORDER BY batch_id != ?, batch_id DESC LIMIT 1",
                (ctx.writer_id, ctx.batch_id, ctx.batch_id),
            ).fetchone()
        return Proof.from_json(row[0]) if row else None

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> str:
        columns = ", ".join(f'"{f.name}" {sql_type(f.type)}' for f in schema)
        table = self.options.table
        with self.connect() as conn:
            existing = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
            if existing and existing != schema.names:
                raise ConfigurationError(
                    f"table {table!r} has columns {existing} but the stream has {schema.names}: "
                    "select the table's columns in the query, or write to another table"
                )
            conn.execute(f'CREATE TABLE IF NOT EXISTS "{table}" ({columns})')
            conn.execute(
                f'CREATE TABLE IF NOT EXISTS "{STAGING}_{table}" ({ATTEMPT} TEXT, {columns})'
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {PROOFS} (writer_id TEXT, batch_id INTEGER, "
                "proof TEXT, PRIMARY KEY (writer_id, batch_id))"
            )
        return uuid.uuid4().hex  # this attempt's tag for staged rows

    @hookimpl
    def commit(self, ctx: BatchContext, state: str, messages: list[SqliteMessage], proof: Proof):
        keys = [m.key for m in messages]
        with self.connect() as conn:
            self._commit(conn, ctx, keys, proof)

    def _commit(self, conn: sqlite3.Connection, ctx: BatchContext, keys: list[str], proof: Proof):
        table, staging = self.options.table, f"{STAGING}_{self.options.table}"
        try:
            conn.execute("BEGIN IMMEDIATE")  # one writer at a time from here to COMMIT
            (last,) = conn.execute(
                f"SELECT max(batch_id) FROM {PROOFS} WHERE writer_id = ?", (ctx.writer_id,)
            ).fetchone()
            if last is not None and last >= ctx.batch_id:
                conn.execute("ROLLBACK")
                raise AlreadyCommitted(f"{ctx.label}: batch {last} already committed")
            if ctx.mode == "complete":
                conn.execute(f'DELETE FROM "{table}"')
            columns = ", ".join(f'"{r[1]}"' for r in conn.execute(f'PRAGMA table_info("{table}")'))
            marks = ",".join("?" * len(keys))
            conn.execute(
                f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM "{staging}" '
                f"WHERE {ATTEMPT} IN ({marks})",
                keys,
            )
            crash_point("commit:data-copied")
            conn.execute(
                f"INSERT INTO {PROOFS} VALUES (?, ?, ?)",
                (ctx.writer_id, ctx.batch_id, proof.to_json()),
            )
            crash_point("commit:proof-written")
            conn.execute(f'DELETE FROM "{staging}" WHERE {ATTEMPT} IN ({marks})', keys)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    @hookimpl
    def abort(self, ctx: BatchContext, state: str | None, messages: list[SqliteMessage | None]):
        if state is None:
            return
        with self.connect() as conn:
            # Only staged rows of this attempt: never anything a commit published.
            conn.execute(
                f'DELETE FROM "{STAGING}_{self.options.table}" WHERE {ATTEMPT} LIKE ?',
                (f"{state}:%",),
            )

    # -- executors -------------------------------------------------------------------------
    @hookimpl
    def write(
        self, state: str, partition_id: int, attempt: int, batches: Iterator[pa.RecordBatch]
    ) -> SqliteMessage:
        key = f"{state}:{partition_id}:{attempt}"
        rows = 0
        with self.connect() as conn:
            conn.execute("BEGIN")
            for batch in batches:
                if batch.num_rows == 0:
                    continue
                marks = ",".join("?" * (batch.num_columns + 1))
                values = [(key, *(_plain(v) for v in row.values())) for row in batch.to_pylist()]
                conn.executemany(
                    f'INSERT INTO "{STAGING}_{self.options.table}" VALUES ({marks})', values
                )
                rows += batch.num_rows
            conn.execute("COMMIT")
        return SqliteMessage(key=key, rows=rows)

    # -- helpers ---------------------------------------------------------------------------
    @staticmethod
    def _has_table(conn: sqlite3.Connection, name: str) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return conn.execute(query, (name,)).fetchone() is not None


def read_rows(path: str, table: str = "events") -> list[dict[str, Any]]:
    """What the target table holds, as dicts (an independent reader: plain SQL)."""
    conn = sqlite3.connect(path)
    try:
        cursor = conn.execute(f'SELECT * FROM "{table}"')
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row)) for row in cursor]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()
