"""The postgres sink against a real server: writers and drivers that meet at one table, a
COMMIT whose reply is lost, a server restart between batches, the type map, the modes, and
the operator's commands; every result read back by plain SQL."""

from __future__ import annotations

import datetime as dt
import decimal
import threading

import pyarrow as pa
import pytest
from eosink_postgres.sink import PostgresSink
from pg_faults import FaultProxy
from pg_helpers import admin, batch_rows, expected_ids, ids, read_table, run, staging_tables

from eosink.plugin import EosinkError, SinkError, clock, hookimpl
from eosink.registry import plugin_manager
from eosink.testing.faultfs import StoreFault
from eosink.testing.faults import FaultPlugin, InjectedCrash
from eosink.testing.postgres import postgres_server_running


def test_two_writers_into_one_table(database):
    """Two queries (two writer ids) into one table, interleaved and concurrently: each
    batch of each writer once; each writer's progress is its own."""
    batches = {w: [batch_rows(b, writer=w) for b in range(4)] for w in (0, 1)}

    def writer(w: int) -> None:
        for b in range(4):
            run(PostgresSink(url=database, table="events"), b, batches[w][b], writer_id=f"w{w}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert ids(read_table(database, "events")) == expected_ids(batches[0] + batches[1])
    for w in (0, 1):  # a replay of each writer's batches is skipped
        for b in range(4):
            assert (
                run(
                    PostgresSink(url=database, table="events"), b, batches[w][b], writer_id=f"w{w}"
                ).status
                == "skipped"
            )
    assert ids(read_table(database, "events")) == expected_ids(batches[0] + batches[1])


def test_two_drivers_on_one_checkpoint(database):
    """Two drivers run the same query (same writer id, same checkpoint) at once, batch by
    batch: every batch lands once, the other driver's attempt is skipped or refused."""
    data = [batch_rows(b) for b in range(5)]
    outcomes: list[str] = []
    errors: list[Exception] = []

    def driver() -> None:
        for b in range(5):
            try:
                outcomes.append(run(PostgresSink(url=database, table="events"), b, data[b]).status)
            except SinkError as exc:  # lost the race at a lock: a clean refusal
                errors.append(exc)

    threads = [threading.Thread(target=driver) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert outcomes.count("committed") == 5, (outcomes, errors)
    assert ids(read_table(database, "events")) == expected_ids(data)
    assert staging_tables(database) == []


class ArmAtCommit:
    """Arms a fault in the proxy when the driver's commit phase begins (init and the tasks
    commit transactions of their own before it)."""

    def __init__(self, proxy: FaultProxy, kind: str) -> None:
        self.proxy, self.kind = proxy, kind

    @hookimpl(wrapper=True)
    def commit(self):
        self.proxy.arm(StoreFault(self.kind, ops=("put",), path="^COMMIT"))
        return (yield)


def test_lost_commit_reply_is_settled_by_the_proof(database):
    """The connection is cut after COMMIT reached the server and before its reply came back:
    the commit landed; the sink reads its proof and reports the batch committed, once."""
    with FaultProxy(database) as proxy:
        sink = PostgresSink(url=proxy.url, table="events")
        run(sink, 0, batch_rows(0))
        outcome = run(
            PostgresSink(url=proxy.url, table="events"),
            1,
            batch_rows(1),
            plugins=[ArmAtCommit(proxy, "lost_reply")],
        )
        assert [f.kind for f in proxy.fired] == ["lost_reply"]
        assert outcome.status == "committed"
        assert ids(read_table(database, "events")) == expected_ids([batch_rows(0), batch_rows(1)])
        assert (
            run(PostgresSink(url=proxy.url, table="events"), 1, batch_rows(1)).status == "skipped"
        )


def test_commit_cut_before_it_reached_the_server(database):
    """The connection is cut before COMMIT reaches the server: nothing of the batch lands,
    the error says so, and the replay commits it once."""
    with FaultProxy(database) as proxy:
        with pytest.raises(SinkError, match="no proof of this attempt"):
            run(
                PostgresSink(url=proxy.url, table="events"),
                0,
                batch_rows(0),
                plugins=[ArmAtCommit(proxy, "error")],
            )
        assert read_table(database, "events") == []
        assert (
            run(PostgresSink(url=proxy.url, table="events"), 0, batch_rows(0)).status == "committed"
        )
        assert ids(read_table(database, "events")) == expected_ids([batch_rows(0)])
        assert staging_tables(database) == []


def test_lost_answer_to_a_copy_cuts_the_connection(database):
    """The proxy's lost reply of a COPY: the server's go-ahead for the data never reaches the
    task, the connection is cut and the server gives up the copy; the batch fails clearly
    (the generated histories draw this fault, and a proxy that waited for a ReadyForQuery
    there would hang the history for ever) and its replay commits it once."""
    with FaultProxy(database) as proxy:
        run(PostgresSink(url=proxy.url, table="events"), 0, batch_rows(0))
        proxy.arm(StoreFault("lost_reply", ops=("put",), path="^COPY"))
        failed: list[Exception] = []

        def batch() -> None:
            try:
                run(PostgresSink(url=proxy.url, table="events"), 1, batch_rows(1))
            except SinkError as exc:
                failed.append(exc)

        task = threading.Thread(target=batch, daemon=True)
        task.start()
        task.join(60)
        assert not task.is_alive(), "the batch waits for the answer of its COPY for ever"
        assert [(f.kind, f.key.split(" ", 1)[0]) for f in proxy.fired] == [("lost_reply", "COPY")]
        assert len(failed) == 1
        assert ids(read_table(database, "events")) == expected_ids([batch_rows(0)])
        assert (
            run(PostgresSink(url=proxy.url, table="events"), 1, batch_rows(1)).status == "committed"
        )
        assert ids(read_table(database, "events")) == expected_ids([batch_rows(0), batch_rows(1)])
        assert staging_tables(database) == []


def test_server_restart_between_batches():
    """The server restarts between two batches: the same sink instance (a foreachBatch
    query's) and a new one both go on; nothing is lost or written twice."""
    with postgres_server_running() as server:
        url = server.url()
        sink = PostgresSink(url=url, table="events")
        run(sink, 0, batch_rows(0))
        server.restart()
        run(sink, 1, batch_rows(1))
        server.restart()
        run(PostgresSink(url=url, table="events"), 2, batch_rows(2))
        assert run(sink, 2, batch_rows(2)).status == "skipped"
        expected = expected_ids([batch_rows(b) for b in range(3)])
        assert ids(read_table(url, "events")) == expected


def test_crash_mid_commit_then_restart(database):
    """A driver dies inside the commit's transaction: the server rolls it back; the replay
    commits the batch once and the crashed attempt's staging tables go."""
    with pytest.raises(InjectedCrash):
        run(
            PostgresSink(url=database, table="events"),
            0,
            batch_rows(0),
            plugins=[FaultPlugin("before_commit")],
        )
    assert read_table(database, "events") == []
    run(PostgresSink(url=database, table="events"), 0, batch_rows(0))
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(0)])


def test_type_map_round_trip(database):
    """Every mapped type goes in and comes back as PostgreSQL keeps it (read by plain SQL),
    into a table the sink creates with the documented types."""
    utc = dt.timezone.utc
    batch = pa.record_batch(
        {
            "id": pa.array([1, 2], pa.int64()),
            "i8": pa.array([-128, None], pa.int8()),
            "i32": pa.array([2**31 - 1, 0], pa.int32()),
            "f32": pa.array([1.5, float("nan")], pa.float32()),
            "f64": pa.array([-0.0, float("inf")], pa.float64()),
            "ok": pa.array([True, None], pa.bool_()),
            "s": pa.array(["ü", ""], pa.string()),
            "b": pa.array([b"\x00\xff", None], pa.binary()),
            "d": pa.array([dt.date(1, 1, 1), dt.date(9999, 12, 31)], pa.date32()),
            "ts": pa.array([dt.datetime(2024, 2, 29, 12, 0, 0, 1), None], pa.timestamp("us")),
            "tz": pa.array([dt.datetime(2024, 1, 1, tzinfo=utc), None], pa.timestamp("us", "UTC")),
            "dec": pa.array([decimal.Decimal("12345.678"), None], pa.decimal128(12, 3)),
            "arr": pa.array([[1, None, 3], []], pa.list_(pa.int64())),
            "st": pa.array(
                [{"a": 1, "b": "x"}, None], pa.struct([("a", pa.int64()), ("b", pa.string())])
            ),
            "m": pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int64())),
            "nested": pa.array([[[1], [2, 3]], None], pa.list_(pa.list_(pa.int64()))),
        }
    )
    run(PostgresSink(url=database, table="types"), 0, [[batch]])
    with admin(database) as conn:
        types = dict(
            conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'public.types'::regclass AND attnum > 0"
            ).fetchall()
        )
    assert types == {
        "id": "bigint",
        "i8": "smallint",
        "i32": "integer",
        "f32": "real",
        "f64": "double precision",
        "ok": "boolean",
        "s": "text",
        "b": "bytea",
        "d": "date",
        "ts": "timestamp without time zone",
        "tz": "timestamp with time zone",
        "dec": "numeric(12,3)",
        "arr": "bigint[]",
        "st": "jsonb",
        "m": "jsonb",
        "nested": "jsonb",
    }
    rows = sorted(read_table(database, "types"), key=lambda r: r["id"])
    first, second = rows
    assert first["i8"] == -128 and first["i32"] == 2**31 - 1 and first["f32"] == 1.5
    assert str(first["f64"]) == "-0.0" and second["f64"] == float("inf")
    assert second["f32"] != second["f32"]  # NaN
    assert first["s"] == "ü" and second["s"] == "" and first["b"] == b"\x00\xff"
    assert first["d"] == dt.date(1, 1, 1) and second["d"] == dt.date(9999, 12, 31)
    assert first["ts"] == dt.datetime(2024, 2, 29, 12, 0, 0, 1)
    assert first["tz"] == dt.datetime(2024, 1, 1, tzinfo=utc)
    assert first["dec"] == decimal.Decimal("12345.678")
    assert first["arr"] == [1, None, 3] and second["arr"] == []
    assert first["st"] == {"a": 1, "b": "x"} and first["m"] == {"k": 1}
    assert first["nested"] == [[1], [2, 3]]


def test_complete_replaces_the_table(database):
    sink = PostgresSink(url=database, table="events")
    run(sink, 0, batch_rows(0), mode="complete")
    run(sink, 1, batch_rows(1), mode="complete")
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(1)])
    assert run(sink, 1, batch_rows(1), mode="complete").status == "skipped"
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(1)])


def test_upsert_is_idempotent_across_writers(database):
    """Two writers upserting the same keys leave each key once, with the latest values."""
    first = batch_rows(0)
    changed = [[b.set_column(1, "name", pa.array(["new"] * b.num_rows)) for b in p] for p in first]
    run(
        PostgresSink(url=database, table="events", mode="upsert", key="id"), 0, first, writer_id="a"
    )
    run(
        PostgresSink(url=database, table="events", mode="upsert", key="id"),
        0,
        changed,
        writer_id="b",
    )
    rows = read_table(database, "events")
    assert ids(rows) == expected_ids([first]) and {r["name"] for r in rows} == {"new"}


def test_recreated_table_does_not_inherit_proofs(database):
    """Proofs are keyed by the table's OID: a table dropped and made again under the same
    name starts without them (batch 0 is written again, not skipped)."""
    run(PostgresSink(url=database, table="events"), 0, batch_rows(0))
    with admin(database) as conn:
        conn.execute("DROP TABLE events")
    assert run(PostgresSink(url=database, table="events"), 0, batch_rows(0)).status == "committed"
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(0)])


def test_status_verify_and_cleanup(database):
    """``eosink status|verify|cleanup postgres``: proofs per writer, counts that agree, and
    the staging tables a crashed attempt left, listed (dry run) and then dropped."""
    run(PostgresSink(url=database, table="events"), 0, batch_rows(0), writer_id="a")
    run(PostgresSink(url=database, table="events"), 0, batch_rows(1), writer_id="b")

    class KillDriver:  # the driver dies after the tasks staged, before abort can run
        from eosink.plugin import hookimpl

        @hookimpl(wrapper=True)
        def abort(self):
            raise InjectedCrash("driver killed")
            yield  # pragma: no cover

    with pytest.raises(InjectedCrash):
        run(
            PostgresSink(url=database, table="events"),
            1,
            batch_rows(2),
            writer_id="a",
            plugins=[FaultPlugin("before_commit"), KillDriver()],
        )
    left = staging_tables(database)
    assert len(left) == 1  # one staging table per batch attempt, whatever its tasks
    pm = plugin_manager(PostgresSink(url=database, path="public.events"))
    status = pm.hook.target_status()
    assert [(p.writer_id, p.batch_id, p.rows) for p in status.writers] == [("a", 0, 6), ("b", 0, 6)]
    assert status.details["staging_tables"] == 1
    assert pm.hook.verify_target().ok
    young = pm.hook.cleanup_target(older_than_s=3600, delete=True)
    assert not young.removable and len(young.kept) == 1 and staging_tables(database) == left
    clock.set_clock(lambda: 1e10)
    try:
        dry = pm.hook.cleanup_target(older_than_s=3600, delete=False)
        assert sorted(x.path for x in dry.removable) == [f"eosink.{n}" for n in left]
        assert staging_tables(database) == left
        done = pm.hook.cleanup_target(older_than_s=3600, delete=True)
        assert done.deleted and staging_tables(database) == []
    finally:
        clock.set_clock(None)
    with admin(database) as conn:  # rows without a proof: verify says so
        conn.execute("INSERT INTO events VALUES (-1, 'by hand')")
    assert "the proofs count 12 rows, the table holds 13" in pm.hook.verify_target().problems


def test_password_stays_out_of_logs_errors_and_proofs(database, capsys, caplog):
    """A batch whose COMMIT reply is lost (the sink logs it), a batch refused for its data, a
    connection refused for its password: the password shows in no log, error, proof or
    staging comment."""
    import structlog

    password = database.split(":")[2].split("@")[0]
    errors = []
    with structlog.testing.capture_logs() as events, FaultProxy(database) as proxy:
        sink = PostgresSink(url=proxy.url, table="events")
        outcome = run(sink, 0, batch_rows(0), plugins=[ArmAtCommit(proxy, "lost_reply")])
        assert outcome.status == "committed"
        bad = pa.record_batch({"id": pa.array([1], pa.int64()), "name": ["a\x00"]})
        for attempt in (
            lambda: run(PostgresSink(url=proxy.url, table="events"), 1, [[bad]]),
            lambda: run(
                PostgresSink(url=proxy.url.replace(password, password + "x"), table="events"),
                1,
                batch_rows(1),
            ),
        ):
            with pytest.raises(EosinkError) as err:
                attempt()
            errors.append(str(err.value) + repr(err.value))
    assert any("commit reply lost" in str(e) for e in events)
    with admin(database) as conn:
        stored = str(conn.execute("SELECT * FROM eosink.proofs").fetchall())
    captured = capsys.readouterr()
    text = " ".join([str(events), *errors, stored, captured.out, captured.err, caplog.text])
    assert password not in text
    assert password not in repr(sink) and password not in repr(sink.options)


def test_table_renamed_and_recreated_inside_the_commit(database):
    """Another application renames the target and creates a new one of the same name while
    the commit runs, just before the rows move: the batch's rows and its proof end up in one
    and the same table (the commit locks the target, then checks it is the one ``init`` saw;
    the other application waits for the commit)."""
    import time

    run(PostgresSink(url=database, table="events"), 0, batch_rows(0))
    done = threading.Event()
    errors: list[BaseException] = []

    def rename_and_recreate() -> None:
        try:
            with admin(database) as conn, conn.transaction():
                conn.execute("SET lock_timeout = '60s'")
                conn.execute("ALTER TABLE events RENAME TO events_old")
                conn.execute("CREATE TABLE events (id bigint, name text)")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            done.set()

    def other_application() -> None:
        """Start the rename; return once it finished or waits for a lock the commit holds."""
        threading.Thread(target=rename_and_recreate, daemon=True).start()
        deadline = time.monotonic() + 30
        with admin(database) as conn:
            while not done.wait(0.05) and time.monotonic() < deadline:
                waiting = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND query LIKE 'ALTER TABLE events RENAME%%'"
                ).fetchone()[0]
                if waiting:
                    return

    with FaultProxy(database) as proxy:
        proxy.before(r'^INSERT INTO "public"\."events"', other_application)
        outcome = run(PostgresSink(url=proxy.url, table="events"), 1, batch_rows(1))
    assert done.wait(60) and not errors, errors
    assert outcome.status == "committed"
    # the rows went where the proof went: the original table (now events_old)
    assert ids(read_table(database, "events_old")) == expected_ids([batch_rows(0), batch_rows(1)])
    assert read_table(database, "events") == []
    old = plugin_manager(PostgresSink(url=database, table="events_old")).hook.verify_target()
    assert old.ok, old.problems
    # the new table is a new target: batch 1 replayed into it is written there
    assert run(PostgresSink(url=database, table="events"), 1, batch_rows(1)).status == "committed"
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(1)])
