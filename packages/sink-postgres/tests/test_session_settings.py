"""Session settings that change bytes (invariant 12): the sink sets them itself, whatever the
server, the database, the role or the environment set as default.

Text reaches the server in the session's ``client_encoding``; the binary COPY encoder sends
Arrow's UTF-8 as it is, so a session in another encoding (a LATIN1 database's default, or
``client_encoding`` set for the database, the role or by ``PGCLIENTENCODING``) would store
mojibake. Every value is read back by plain SQL in the database's own encoding."""

from __future__ import annotations

import datetime as dt
import decimal

import psycopg
import pyarrow as pa
import pytest
from eosink_postgres.sink import PostgresSink
from pg_helpers import admin, run, scratch_database, staging_tables

from eosink import ConfigurationError

LATIN1_TEXT = ["ü", "café", "ÀÉÎÕÜ ß ñ", "plain"]
#: Characters no single-byte encoding of the West holds, beside Latin-1 ones.
UNICODE_TEXT = ["ü ✓", "日本語", "😀", "€ and ‰"]


def text_batch(values: list[str], row_by_row: bool) -> pa.RecordBatch:
    """A batch of text, in a struct (jsonb) too; ``row_by_row``: with a decimal column, which
    sends the batch through psycopg's row-by-row COPY instead of the column-wise encoder."""
    columns = {
        "id": pa.array(range(len(values)), pa.int64()),
        "s": pa.array(values, pa.string()),
    }
    if row_by_row:
        columns["dec"] = pa.array([decimal.Decimal("1.5")] * len(values), pa.decimal128(5, 1))
        columns["st"] = pa.array([{"t": v} for v in values], pa.struct([("t", pa.string())]))
    return pa.record_batch(columns)


def read_back(url: str) -> list[tuple]:
    """(id, s[, st->>t]) of every row (plain psycopg, the server converting from the
    database's encoding to the reader's, UTF8)."""
    with psycopg.connect(url, autocommit=True, client_encoding="UTF8") as conn:
        cols = [
            r[0]
            for r in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'public.events'::regclass "
                "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
            ).fetchall()
        ]
        extra = ", st->>'t'" if "st" in cols else ""
        return conn.execute(f"SELECT id, s{extra} FROM events ORDER BY id").fetchall()


def expected(values: list[str], row_by_row: bool) -> list[tuple]:
    return [(i, v, v) if row_by_row else (i, v) for i, v in enumerate(values)]


@pytest.fixture
def latin1_database(postgres_server):
    """A fresh LATIN1 database (``createdb -E LATIN1 --locale=C -T template0``)."""
    with scratch_database(postgres_server, "l1", "ENCODING 'LATIN1' LOCALE 'C'") as url:
        yield url


@pytest.mark.parametrize("row_by_row", [False, True], ids=["column-wise", "row-by-row"])
def test_latin1_database_stores_the_text_sent(latin1_database, row_by_row):
    values = LATIN1_TEXT
    run(PostgresSink(url=latin1_database, table="events"), 0, [[text_batch(values, row_by_row)]])
    assert read_back(latin1_database) == expected(values, row_by_row)


def test_latin1_database_refuses_what_it_cannot_hold(latin1_database):
    """A character the database's encoding lacks is refused naming the encoding and the fix;
    nothing lands and no staging table is left."""
    batch = text_batch(["ü", "✓"], False)
    with pytest.raises(ConfigurationError, match=r"LATIN1.*(UTF8|encoding)") as err:
        run(PostgresSink(url=latin1_database, table="events"), 0, [[batch]])
    assert "column" in str(err.value)
    with admin(latin1_database) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0
    assert staging_tables(latin1_database) == []


@pytest.mark.parametrize("row_by_row", [False, True], ids=["column-wise", "row-by-row"])
@pytest.mark.parametrize("where", ["database", "role", "environment"])
def test_client_encoding_default_is_overridden(
    database, postgres_server, monkeypatch, where, row_by_row
):
    """A UTF8 database whose sessions default to WIN1252 (``ALTER DATABASE/ROLE ... SET
    client_encoding``, or ``PGCLIENTENCODING``): every character is stored as sent."""
    dbname = database.rsplit("/", 1)[1]
    url = database
    with admin(database) as conn:
        if where == "database":
            conn.execute(f'ALTER DATABASE "{dbname}" SET client_encoding = WIN1252')
        elif where == "role":
            conn.execute(f"CREATE ROLE enc_{dbname} LOGIN PASSWORD 'pw' SUPERUSER")
            conn.execute(f"ALTER ROLE enc_{dbname} SET client_encoding = WIN1252")
            url = postgres_server.url(database=dbname, user=f"enc_{dbname}", password="pw")
        else:
            monkeypatch.setenv("PGCLIENTENCODING", "WIN1252")
    try:
        with psycopg.connect(url) as probe:  # the default really is WIN1252 here
            assert probe.execute("SHOW client_encoding").fetchone()[0] == "WIN1252"
        values = LATIN1_TEXT + UNICODE_TEXT
        run(PostgresSink(url=url, table="events"), 0, [[text_batch(values, row_by_row)]])
        monkeypatch.delenv("PGCLIENTENCODING", raising=False)
        assert read_back(database) == expected(values, row_by_row)
    finally:
        if where == "role":
            with admin(database) as conn:
                conn.execute(f"DROP OWNED BY enc_{dbname}")
                conn.execute(f"DROP ROLE enc_{dbname}")


def test_time_zone_default_does_not_change_values(database):
    """A database whose sessions default to a zone far from UTC: instants and local times
    are stored as sent (the sink sets the session's zone to UTC)."""
    dbname = database.rsplit("/", 1)[1]
    with admin(database) as conn:
        conn.execute(f"ALTER DATABASE \"{dbname}\" SET TimeZone = 'Pacific/Kiritimati'")
    at = dt.datetime(2024, 3, 1, 12, 30, tzinfo=dt.timezone.utc)
    local = dt.datetime(2024, 3, 1, 12, 30)
    batch = pa.record_batch(
        {
            "id": pa.array([1], pa.int64()),
            "at": pa.array([at], pa.timestamp("us", "UTC")),
            "local": pa.array([local], pa.timestamp("us")),
            "st": pa.array([{"t": at}], pa.struct([("t", pa.timestamp("us", "UTC"))])),
        }
    )
    run(PostgresSink(url=database, table="events"), 0, [[batch]])
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        row = conn.execute("SELECT at, local, st->>'t' FROM events").fetchone()
    assert row[0] == at and row[1] == local
    assert dt.datetime.fromisoformat(row[2]) == at
