"""What operators do to move or reshape a database, between two runs of a query: a logical
dump restored into a fresh database (the whole database, or the table with the meta schema),
into the same one (``pg_restore --clean``) or into another server; a table renamed and a new
one made under its name; and proofs an earlier version of the sink keyed by the table's OID.

After each, a replayed batch that the moved table already holds is skipped (never written
twice), a new batch is written once, and a table that is not the one the proofs were written
with starts without them. Dumps are made and restored by the machine's own ``pg_dump`` and
``pg_restore`` (the server's version, PostgreSQL 15); every result is read by plain SQL."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from eosink_postgres.sink import PostgresSink
from pg_helpers import admin, batch_rows, expected_ids, ids, read_table, run, scratch_database

from eosink.plugin import Proof
from eosink.registry import plugin_manager
from eosink.testing.postgres import find_binaries, postgres_server_running


def pg_tool(name: str, *args: str, url: str) -> None:
    """Run the server's own ``pg_dump``/``pg_restore`` (the password through the environment)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    env = {**os.environ, "PGPASSWORD": parts.password or ""}
    conn = ["-h", parts.hostname or "", "-p", str(parts.port), "-U", parts.username or ""]
    done = subprocess.run(
        [os.path.join(find_binaries(), name), *conn, *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def dump(url: str, path: str, *args: str) -> None:
    pg_tool("pg_dump", "-Fc", "-f", path, *args, url.rsplit("/", 1)[1], url=url)


def restore(path: str, url: str, *args: str) -> None:
    pg_tool("pg_restore", "--no-owner", "-d", url.rsplit("/", 1)[1], *args, path, url=url)


@pytest.fixture
def fresh_database(postgres_server):
    """Another empty database on the session's server: where a dump is restored."""
    with scratch_database(postgres_server, "r") as url:
        yield url


def two_batches(url: str, table: str = "events") -> None:
    for b in (0, 1):
        assert run(PostgresSink(url=url, table=table), b, batch_rows(b)).status == "committed"


def assert_resumes(url: str, table: str = "events") -> None:
    """The replay of batch 1 is skipped, batch 2 is written once, verify agrees."""
    sink = PostgresSink(url=url, table=table)
    assert run(sink, 1, batch_rows(1)).status == "skipped"
    assert run(sink, 2, batch_rows(2)).status == "committed"
    assert run(sink, 2, batch_rows(2)).status == "skipped"
    want = expected_ids([batch_rows(b) for b in range(3)])
    assert ids(read_table(url, table)) == want
    verified = plugin_manager(PostgresSink(url=url, table=table)).hook.verify_target()
    assert verified.ok, verified.problems


def test_whole_database_dump_restored_into_a_fresh_database(database, fresh_database, tmp_path):
    two_batches(database)
    dump(database, str(tmp_path / "db.dump"))
    restore(str(tmp_path / "db.dump"), fresh_database)
    assert ids(read_table(fresh_database, "events")) == expected_ids([batch_rows(0), batch_rows(1)])
    assert_resumes(fresh_database)
    # the original database is untouched by what happened to the copy, and goes on too
    assert_resumes(database)


def test_table_and_meta_schema_dumped_together(database, fresh_database, tmp_path):
    """``pg_dump -t public.events -t 'eosink.(targets|progress|proofs)'`` (``-t`` dumps no
    schema: the operator makes the meta schema first): the table and its proofs move,
    nothing else."""
    two_batches(database)
    two_batches(database, "other")
    meta = ["-t", "eosink.targets", "-t", "eosink.progress", "-t", "eosink.proofs"]
    dump(database, str(tmp_path / "t.dump"), "-t", "public.events", *meta)
    with admin(fresh_database) as conn:
        conn.execute("CREATE SCHEMA eosink")
    restore(str(tmp_path / "t.dump"), fresh_database)
    assert read_table(fresh_database, "other") == []
    assert_resumes(fresh_database)


def test_restored_in_place_with_clean(database, tmp_path):
    """``pg_restore --clean`` into the same database: every table is dropped and made again
    (new OIDs for the target and the meta schema alike)."""
    two_batches(database)
    dump(database, str(tmp_path / "db.dump"))
    with admin(database) as conn:
        before = conn.execute("SELECT 'public.events'::regclass::oid").fetchone()[0]
    restore(str(tmp_path / "db.dump"), database, "--clean", "--if-exists")
    with admin(database) as conn:
        assert conn.execute("SELECT 'public.events'::regclass::oid").fetchone()[0] != before
    assert_resumes(database)


def test_restored_into_another_server(database, tmp_path):
    """A dump restored on another server (another cluster: its OIDs start again from the
    same number, so an OID there may equal one of the old server's)."""
    two_batches(database)
    dump(database, str(tmp_path / "db.dump"))
    with postgres_server_running() as other:
        url = other.url(database="moved")
        with admin(other.url()) as conn:
            conn.execute("CREATE DATABASE moved TEMPLATE template0")
        restore(str(tmp_path / "db.dump"), url)
        assert_resumes(url)


def test_restore_without_the_target_starts_over(database, fresh_database, tmp_path):
    """Only the meta schema restored, the table not: the table the sink then creates is a
    new, empty target, and the proofs of the old one do not skip its batches."""
    two_batches(database)
    dump(database, str(tmp_path / "meta.dump"), "-n", "eosink")
    restore(str(tmp_path / "meta.dump"), fresh_database)
    status = run(PostgresSink(url=fresh_database, table="events"), 1, batch_rows(1)).status
    assert status == "committed"
    assert ids(read_table(fresh_database, "events")) == expected_ids([batch_rows(1)])


def test_renamed_and_recreated_table(database):
    """A table renamed, and a new one made under its name: the renamed table keeps its
    proofs (its batches are skipped), the new one starts without them."""
    two_batches(database)
    with admin(database) as conn:
        conn.execute("ALTER TABLE events RENAME TO events_old")
        conn.execute("CREATE TABLE events (id bigint, name text)")
    status = run(PostgresSink(url=database, table="events_old"), 1, batch_rows(1)).status
    assert status == "skipped"
    status = run(PostgresSink(url=database, table="events"), 1, batch_rows(1)).status
    assert status == "committed"
    assert ids(read_table(database, "events")) == expected_ids([batch_rows(1)])
    assert ids(read_table(database, "events_old")) == expected_ids([batch_rows(0), batch_rows(1)])


def test_renamed_and_recreated_then_restored(database, fresh_database, tmp_path):
    """Rename and recreate, a batch into each table, then a whole-database restore: each
    table keeps its own proofs."""
    two_batches(database)
    with admin(database) as conn:
        conn.execute("ALTER TABLE events RENAME TO events_old")
    run(PostgresSink(url=database, table="events"), 5, batch_rows(5))
    run(PostgresSink(url=database, table="events_old"), 2, batch_rows(2))
    dump(database, str(tmp_path / "db.dump"))
    restore(str(tmp_path / "db.dump"), fresh_database)
    for table, batch in (("events", 5), ("events_old", 2), ("events_old", 1)):
        sink = PostgresSink(url=fresh_database, table=table)
        assert run(sink, batch, batch_rows(batch)).status == "skipped", (table, batch)
    status = run(PostgresSink(url=fresh_database, table="events"), 4, batch_rows(4)).status
    assert status == "skipped"
    assert ids(read_table(fresh_database, "events")) == expected_ids([batch_rows(5)])
    assert ids(read_table(fresh_database, "events_old")) == expected_ids(
        [batch_rows(b) for b in range(3)]
    )


OLD_LAYOUT = [
    "CREATE SCHEMA eosink",
    "CREATE TABLE eosink.progress (target_oid oid NOT NULL, writer_id text NOT NULL, "
    "last_batch bigint NOT NULL, PRIMARY KEY (target_oid, writer_id))",
    "CREATE TABLE eosink.proofs (target_oid oid NOT NULL, writer_id text NOT NULL, "
    "batch_id bigint NOT NULL, attempt text NOT NULL, target text NOT NULL, "
    "mode text NOT NULL, rows bigint, fingerprint text, query_id text, checkpoint text, "
    "committed_at timestamptz NOT NULL DEFAULT now(), proof jsonb NOT NULL, "
    "PRIMARY KEY (target_oid, writer_id, batch_id))",
]


def test_proofs_keyed_by_oid_are_migrated(database):
    """A database whose proofs an earlier version keyed by the table's OID (two writers, and
    a dropped table's proofs): they keep skipping their batches, new ones are written, and
    the proofs are then keyed so that a dump and restore keeps them."""
    with admin(database) as conn:
        for statement in OLD_LAYOUT:
            conn.execute(statement)
        conn.execute("CREATE TABLE events (id bigint, name text)")
        conn.execute("CREATE TABLE gone (id bigint, name text)")
        for table, writer, last in (("events", "w", 1), ("events", "v", 0), ("gone", "w", 3)):
            oid = conn.execute("SELECT %s::regclass::oid", (f"public.{table}",)).fetchone()[0]
            conn.execute("INSERT INTO eosink.progress VALUES (%s, %s, %s)", (oid, writer, last))
            for b in range(last + 1):
                rows = [r for p in batch_rows(b) for r in p]
                if table == "events" and writer == "w":
                    for r in rows:
                        conn.execute(
                            "INSERT INTO events SELECT * FROM unnest(%s::bigint[], %s::text[])",
                            (r.column("id").to_pylist(), r.column("name").to_pylist()),
                        )
                proof = Proof(writer_id=writer, batch_id=b, rows=6)
                conn.execute(
                    "INSERT INTO eosink.proofs (target_oid, writer_id, batch_id, attempt, "
                    "target, mode, rows, proof) VALUES (%s, %s, %s, 'old', %s, 'append', 6, %s)",
                    (oid, writer, b, f"public.{table}", json.dumps(proof.to_dict())),
                )
        conn.execute("DROP TABLE gone")
    sink = PostgresSink(url=database, table="events")
    assert sink.is_committed(_ctx("w", 1)) is not None  # read before anything is migrated
    assert run(sink, 1, batch_rows(1)).status == "skipped"
    status = run(PostgresSink(url=database, table="events"), 2, batch_rows(2)).status
    assert status == "committed"
    status = run(PostgresSink(url=database, table="events"), 0, batch_rows(0), "v").status
    assert status == "skipped"
    # a new table called gone is not the dropped one: its batches are written
    assert run(PostgresSink(url=database, table="gone"), 3, batch_rows(3)).status == "committed"
    want = expected_ids([batch_rows(b) for b in range(3)])
    assert ids(read_table(database, "events")) == want
    with admin(database) as conn:
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'eosink.proofs'::regclass "
                "AND attnum > 0 AND NOT attisdropped"
            ).fetchall()
        }
    assert "target_oid" not in columns
    status = plugin_manager(PostgresSink(url=database, table="events")).hook.target_status()
    assert sorted((p.writer_id, p.batch_id) for p in status.writers) == [("v", 0), ("w", 2)]


def _ctx(writer: str, batch: int):
    from eosink.plugin import BatchContext

    return BatchContext(sink="postgres", writer_id=writer, batch_id=batch)


def test_identity_needs_no_superuser(database):
    """A role that is no superuser (CREATE on the database, its own table) reads the
    database's incarnation, binds its target and skips a replay."""
    dbname = database.rsplit("/", 1)[1]
    with admin(database) as conn:
        conn.execute("CREATE ROLE plain_writer LOGIN PASSWORD 'pw'")
        conn.execute(f'GRANT CREATE ON DATABASE "{dbname}" TO plain_writer')
        conn.execute("GRANT ALL ON SCHEMA public TO plain_writer")
    url = database.replace("postgres:eosink-test-postgres-password@", "plain_writer:pw@")
    try:
        two_batches(url)
        assert run(PostgresSink(url=url, table="events"), 1, batch_rows(1)).status == "skipped"
    finally:
        with admin(database) as conn:
            conn.execute("DROP OWNED BY plain_writer")
            conn.execute("DROP ROLE plain_writer")
