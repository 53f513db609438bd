"""Bad input: each a clear error naming the fix, nothing written, no secret in the text."""

from __future__ import annotations

import datetime as dt
import socket

import pyarrow as pa
import pytest
from eosink_postgres.sink import PostgresSink
from pg_helpers import admin, batch_rows, read_table, run, staging_tables

from eosink import ConfigurationError, EosinkError

SECRET = "s3cr3t-Pa55"  # noqa: S105 - a test role's


@pytest.fixture
def writer_role(database):
    """A role that may write (owner of a schema of its own), with a known password."""
    with admin(database) as conn:
        conn.execute(f"CREATE ROLE writer LOGIN PASSWORD '{SECRET}'")
        conn.execute("GRANT CREATE ON DATABASE " + database.rsplit("/", 1)[1] + " TO writer")
        conn.execute("GRANT ALL ON SCHEMA public TO writer")
    yield database.replace("postgres:eosink-test-postgres-password@", f"writer:{SECRET}@")
    with admin(database) as conn:
        conn.execute("DROP OWNED BY writer")
        conn.execute("DROP ROLE writer")


def test_wrong_password(database, writer_role):
    url = writer_role.replace(SECRET, "wrong-" + SECRET)
    sink = PostgresSink(url=url, table="events")
    with pytest.raises(ConfigurationError, match="check options user and password") as err:
        run(sink, 0, batch_rows(0))
    assert SECRET not in str(err.value) and "wrong-" not in str(err.value)
    assert read_table(database, "events") == []


def test_refused_connection(database):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://writer:{SECRET}@127.0.0.1:{port}/db"
    with pytest.raises(ConfigurationError, match="check options host and port") as err:
        run(PostgresSink(url=url, table="events"), 0, batch_rows(0))
    assert SECRET not in str(err.value)


def test_password_masked_in_repr_and_options(database):
    sink = PostgresSink(url=f"postgresql://u:{SECRET}@h/db", table="t")
    other = PostgresSink(host="h", user="u", password=SECRET, table="t")
    keyword = PostgresSink(url=f"host=h user=u password={SECRET} dbname=db", table="t")
    for s in (sink, other, keyword):
        assert SECRET not in repr(s) and SECRET not in repr(s.options)
        assert "***" in repr(s.options)


def test_missing_table_without_create(database):
    sink = PostgresSink(url=database, table="public.events", create_table=False)
    with pytest.raises(ConfigurationError, match="does not exist.*create_table=true"):
        run(sink, 0, batch_rows(0))
    assert read_table(database, "events") == []


@pytest.mark.parametrize(
    ("ddl", "match"),
    [
        ("id bigint, name integer", r"column 'name' is integer in the table, the stream's is text"),
        ("id bigint", r"column 'name' \(text\) is not in the table"),
        ("id bigint, name text, extra int NOT NULL", r"'extra' is NOT NULL without default"),
        ("id integer, name text", r"column 'id' is integer in the table, the stream's is bigint"),
    ],
)
def test_schema_mismatch(database, ddl, match):
    with admin(database) as conn:
        conn.execute(f"CREATE TABLE events ({ddl})")
    sink = PostgresSink(url=database, table="events")
    with pytest.raises(ConfigurationError, match=match):
        run(sink, 0, batch_rows(0))
    assert read_table(database, "events") == []
    assert staging_tables(database) == []


def test_timestamp_kinds_are_not_mixed(database):
    """Spark's TimestampType (an instant) into a timestamp-without-time-zone column would
    shift values by the session's zone: refused, naming both kinds."""
    with admin(database) as conn:
        conn.execute("CREATE TABLE events (id bigint, at timestamp)")
    batch = pa.record_batch(
        {
            "id": pa.array([1], pa.int64()),
            "at": pa.array(
                [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)], pa.timestamp("us", "UTC")
            ),
        }
    )
    with pytest.raises(ConfigurationError, match="TimestampType"):
        run(PostgresSink(url=database, table="events"), 0, [[batch]])


def test_wider_columns_are_accepted(database):
    with admin(database) as conn:
        conn.execute("CREATE TABLE events (id numeric(30,0), name varchar(20), note text)")
    run(PostgresSink(url=database, table="events"), 0, batch_rows(0))
    assert len(read_table(database, "events")) == 6


def test_read_only_role(database):
    with admin(database) as conn:
        conn.execute("CREATE TABLE events (id bigint, name text)")
        conn.execute(f"CREATE ROLE reader LOGIN PASSWORD '{SECRET}'")
        conn.execute("GRANT SELECT ON events TO reader")
    url = database.replace("postgres:eosink-test-postgres-password@", f"reader:{SECRET}@")
    try:
        with pytest.raises(
            ConfigurationError, match="permission denied.*role needs SELECT, INSERT"
        ) as err:
            run(PostgresSink(url=url, table="events"), 0, batch_rows(0))
        assert SECRET not in str(err.value)
        # a role whose sessions are read-only (as on a standby)
        with admin(database) as conn:
            conn.execute("ALTER ROLE reader SET default_transaction_read_only = on")
            conn.execute("GRANT ALL ON events TO reader")
            conn.execute("GRANT ALL ON SCHEMA public TO reader")
        with pytest.raises(ConfigurationError, match="read-only"):
            run(PostgresSink(url=url, table="events"), 0, batch_rows(0))
        assert read_table(database, "events") == []
    finally:
        with admin(database) as conn:
            conn.execute("DROP OWNED BY reader")
            conn.execute("DROP ROLE reader")


def test_upsert_without_key():
    with pytest.raises(ConfigurationError, match="needs option key"):
        PostgresSink(url="postgresql://h/db", table="t", mode="upsert")
    with pytest.raises(ConfigurationError, match="mode 'upsert'"):
        PostgresSink(url="postgresql://h/db", table="t", key="id")


def test_upsert_without_unique_constraint(database):
    with admin(database) as conn:
        conn.execute("CREATE TABLE events (id bigint, name text)")
    sink = PostgresSink(url=database, table="events", mode="upsert", key="id")
    with pytest.raises(ConfigurationError, match=r"ADD UNIQUE \(id\)"):
        run(sink, 0, batch_rows(0))
    assert read_table(database, "events") == []


def test_upsert_duplicate_keys_in_one_batch(database):
    sink = PostgresSink(url=database, table="events", mode="upsert", key="id")
    run(sink, 0, batch_rows(0))
    dup = pa.record_batch({"id": pa.array([7, 7], pa.int64()), "name": ["a", "b"]})
    with pytest.raises(
        ConfigurationError, match=r"2 rows of one batch have the same key \(id\) = \(7,\)"
    ):
        run(sink, 1, [[dup]])
    assert len(read_table(database, "events")) == 6
    assert staging_tables(database) == []


def test_upsert_null_key(database):
    sink = PostgresSink(url=database, table="events", mode="upsert", key="id")
    rows = pa.record_batch({"id": pa.array([1, None], pa.int64()), "name": ["a", "b"]})
    with pytest.raises(ConfigurationError, match="null key column"):
        run(sink, 0, [[rows]])
    assert read_table(database, "events") == []


def test_upsert_null_key_into_a_nullable_unique_key(database):
    """A UNIQUE key over a nullable column takes any number of nulls: the sink, not the
    server, must refuse the row, before anything is written."""
    with admin(database) as conn:
        conn.execute("CREATE TABLE events (id bigint UNIQUE, name text)")
    sink = PostgresSink(url=database, table="events", mode="upsert", key="id")
    rows = pa.record_batch({"id": pa.array([1, None], pa.int64()), "name": ["a", "b"]})
    with pytest.raises(ConfigurationError, match="1 row.s. of the batch have a null key column"):
        run(sink, 0, [[rows]])
    assert read_table(database, "events") == []
    assert staging_tables(database) == []


def test_upsert_duplicate_keys_across_tasks_on_a_key_already_held(database):
    """Two tasks' rows on one key the table already holds: refused, naming the key; the
    table keeps its row."""
    sink = PostgresSink(url=database, table="events", mode="upsert", key="id")
    run(sink, 0, [[pa.record_batch({"id": pa.array([5], pa.int64()), "name": ["old"]})]])
    parts = [
        [pa.record_batch({"id": pa.array([5, 6], pa.int64()), "name": ["a", "x"]})],
        [pa.record_batch({"id": pa.array([5], pa.int64()), "name": ["b"]})],
    ]
    with pytest.raises(
        ConfigurationError, match=r"2 rows of one batch have the same key \(id\) = \(5,\)"
    ):
        run(sink, 1, parts)
    assert read_table(database, "events") == [{"id": 5, "name": "old"}]
    assert staging_tables(database) == []


def test_nul_character_in_text(database):
    rows = pa.record_batch({"id": pa.array([1], pa.int64()), "name": ["a\x00b"]})
    with pytest.raises(ConfigurationError, match=r"column 'name' holds the NUL character"):
        run(PostgresSink(url=database, table="events"), 0, [[rows]])
    assert read_table(database, "events") == []
    assert staging_tables(database) == []


def test_unmapped_type(database):
    rows = pa.record_batch({"id": pa.array([1], pa.int64()), "d": pa.array([1], pa.duration("s"))})
    with pytest.raises(ConfigurationError, match="column 'd' has type duration"):
        run(PostgresSink(url=database, table="events"), 0, [[rows]])


def test_not_a_table_name():
    with pytest.raises(ConfigurationError, match=r"\[schema.\]table"):
        PostgresSink(url="postgresql://h/db", table="a.b.c")


def test_complete_with_upsert(database):
    sink = PostgresSink(url=database, table="events", mode="upsert", key="id")
    with pytest.raises(EosinkError, match="exclude each other"):
        run(sink, 0, batch_rows(0), mode="complete")


# -- values PostgreSQL cannot hold, targets the commit cannot fill (issue 34, finding 15) -------
DAYS_PG_MIN = -2_440_588  # 4714-11-24 BC, PostgreSQL's first date, in days since 1970
DAYS_PG_END = 2_145_042_906  # the first day after PostgreSQL's last date (5874897-12-31)
MICROS_PG_MIN = -210_866_803_200_000_000  # PostgreSQL's first timestamp, since 1970
DECIMAL = pa.array([None], pa.decimal128(5, 1))  # a column that sends a batch row by row


@pytest.mark.parametrize("row_by_row", [False, True], ids=["column-wise", "row-by-row"])
@pytest.mark.parametrize(
    ("column", "values"),
    [
        # int32 days that the encoder's 2000-based shift wraps to infinity or to a valid date
        ("d", pa.array([-(2**31) + 10_956], pa.date32())),
        ("d", pa.array([-(2**31) + 100], pa.date32())),
        ("d", pa.array([DAYS_PG_MIN - 1], pa.date32())),
        ("d", pa.array([DAYS_PG_END], pa.date32())),
        # int64 microseconds that wrap to year 294247, or to -infinity
        ("ts", pa.array([-(2**63) + 1], pa.timestamp("us"))),
        ("ts", pa.array([-(2**63) + 946_684_800_000_000], pa.timestamp("us"))),
        ("tz", pa.array([MICROS_PG_MIN - 1], pa.timestamp("us", "UTC"))),
    ],
)
def test_dates_and_timestamps_out_of_range(database, column, values, row_by_row):
    """A date or timestamp PostgreSQL cannot hold is refused naming the column, never stored
    as infinity or as another instant."""
    columns = {"id": pa.array([1], pa.int64()), column: values}
    if row_by_row:
        columns["dec"] = DECIMAL
    with pytest.raises(ConfigurationError, match=rf"column '{column}'.*(range|year)"):
        run(PostgresSink(url=database, table="events"), 0, [[pa.record_batch(columns)]])
    assert read_table(database, "events") == []
    assert staging_tables(database) == []


def test_dates_and_timestamps_at_the_edges_are_kept(database):
    """Spark's first and last day and instant, row by row too, in a zone west of UTC (an
    instant near year 1 there is in year 0 of the local calendar)."""
    first = dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc)
    last = dt.datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=dt.timezone.utc)
    batch = pa.record_batch(
        {
            "id": pa.array([1, 2], pa.int64()),
            "d": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()),
            "ts": pa.array([first, last], pa.timestamp("us", "America/New_York")),
            "dec": pa.array([None, None], pa.decimal128(5, 1)),
        }
    )
    run(PostgresSink(url=database, table="events"), 0, [[batch]])
    rows = sorted(read_table(database, "events"), key=lambda r: r["id"])
    assert [r["d"] for r in rows] == [dt.date(1, 1, 1), dt.date(9999, 12, 31)]
    assert [r["ts"] for r in rows] == [first, last]


def test_maps_are_json_objects_empty_or_not(database):
    batch = pa.record_batch(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "m": pa.array([[("k", 1)], [], None], pa.map_(pa.string(), pa.int64())),
            "st": pa.array(
                [{"m": []}, {"m": [("a", 2)]}, {"m": None}],
                pa.struct([("m", pa.map_(pa.string(), pa.int64()))]),
            ),
            "lm": pa.array([[[]], [], None], pa.list_(pa.map_(pa.string(), pa.int64()))),
        }
    )
    run(PostgresSink(url=database, table="events"), 0, [[batch]])
    with admin(database) as conn:
        got = conn.execute("SELECT id, m::text, st::text, lm::text FROM events ORDER BY id")
        rows = got.fetchall()
    assert rows == [
        (1, '{"k": 1}', '{"m": {}}', "[{}]"),
        (2, "{}", '{"m": {"a": 2}}', "[]"),
        (3, None, '{"m": null}', None),
    ]


@pytest.mark.parametrize(
    ("ddl", "match"),
    [
        ("id bigint, name json", r"column 'name' is json in the table, the stream's is text"),
        ("id numeric(10,0), name text", r"column 'id' is numeric\(10,0\) in the table"),
        ("id numeric(20,2), name text", r"column 'id' is numeric\(20,2\) in the table"),
    ],
)
def test_targets_the_commit_cannot_fill(database, ddl, match):
    """Refused at init, before anything is staged: a commit could never move these rows (no
    cast from text to json) or only some of them (a bigint needs 19 digits)."""
    with admin(database) as conn:
        conn.execute(f"CREATE TABLE events ({ddl})")
    with pytest.raises(ConfigurationError, match=match):
        run(PostgresSink(url=database, table="events"), 0, batch_rows(0))
    assert read_table(database, "events") == []
    assert staging_tables(database) == []


def test_numeric_wide_enough_for_bigint(database):
    with admin(database) as conn:
        conn.execute("CREATE TABLE events (id numeric(19,0), name text)")
    big = pa.record_batch(
        {"id": pa.array([2**63 - 1, -(2**63)], pa.int64()), "name": ["a", "b"]}
    )
    run(PostgresSink(url=database, table="events"), 0, [[big]])
    assert sorted(r["id"] for r in read_table(database, "events")) == [-(2**63), 2**63 - 1]


def test_nul_character_in_jsonb(database):
    """A real NUL inside a struct is refused naming the column; the six characters
    ``\\u0000`` are text like any other and are stored as they are."""
    struct = pa.struct([("t", pa.string()), ("l", pa.list_(pa.string()))])
    bad = pa.record_batch(
        {"id": pa.array([1], pa.int64()), "st": pa.array([{"t": "a", "l": ["x\x00"]}], struct)}
    )
    with pytest.raises(ConfigurationError, match=r"column 'st' holds the NUL character"):
        run(PostgresSink(url=database, table="events"), 0, [[bad]])
    assert read_table(database, "events") == []
    text = "\\u0000 and \\x00"
    fine = pa.record_batch(
        {"id": pa.array([2], pa.int64()), "st": pa.array([{"t": text, "l": [text]}], struct)}
    )
    run(PostgresSink(url=database, table="events"), 0, [[fine]])
    assert [r["st"] for r in read_table(database, "events")] == [{"t": text, "l": [text]}]


def test_zoned_instants_near_year_one_nested(database):
    """Instants near year 1 in a zone west of UTC inside an array and a struct (row by row)
    are stored as the instants they are."""
    first = dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc)
    zone = pa.timestamp("us", "America/New_York")
    batch = pa.record_batch(
        {
            "id": pa.array([1], pa.int64()),
            "arr": pa.array([[first]], pa.list_(zone)),
            "st": pa.array([{"t": first}], pa.struct([("t", zone)])),
        }
    )
    run(PostgresSink(url=database, table="events"), 0, [[batch]])
    (row,) = read_table(database, "events")
    assert row["arr"] == [first]
    assert dt.datetime.fromisoformat(row["st"]["t"]) == first
