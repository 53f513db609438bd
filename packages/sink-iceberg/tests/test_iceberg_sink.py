"""The iceberg sink's own guarantees, beyond the kit: the proof survives snapshot expiry, a
recreated table inherits no proof, zombies lose even where the table asks pyiceberg to retry,
two writers' concurrent commits both land, complete mode replaces the table, merge_schema."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from eosink_iceberg.proof import SUMMARY_BATCH, property_key
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import (
    TABLE,
    catalog_properties,
    load,
    duckdb_missing,
    read_checked,
    read_duckdb,
    read_pyiceberg,
    rows,
    run,
)

from eosink.plugin import BatchContext, hookimpl
from eosink.testing import run_batch
from eosink.protocol import prepare
from eosink.registry import plugin_manager
from eosink.testing.local import LocalRunner


@pytest.fixture
def catalog(tmp_path):
    return catalog_properties(tmp_path)


@pytest.fixture
def sink(catalog):
    return IcebergSink(table=TABLE, catalog=catalog, create_namespace=True)


def ids(table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def test_replay_after_every_snapshot_but_the_current_one_expired_is_skipped(sink, catalog):
    for batch in range(4):
        assert run(sink, batch).status == "committed"
    table = load(catalog)
    current = table.metadata.current_snapshot().snapshot_id
    old = [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id != current]
    assert len(old) == 3
    table.maintenance.expire_snapshots().by_ids(old).commit()
    table = load(catalog)
    assert [s.snapshot_id for s in table.metadata.snapshots] == [current]
    # what Iceberg's own streaming writers would find by walking parents: only the last batch
    summaries = [s.summary.additional_properties.get(SUMMARY_BATCH) for s in table.snapshots()]
    assert summaries == ["3"]
    for batch in (1, 2, 3):  # Spark replays the last batches after a restart
        assert run(IcebergSink(table=TABLE, catalog=catalog), batch).status == "skipped"
    expected = [b * 1000 + i for b in range(4) for i in range(5)]
    assert ids(read_checked(catalog)) == expected
    assert run(sink, 4).status == "committed"


def test_a_recreated_table_inherits_no_proof(sink, catalog):
    """A table dropped and created anew under the name, its properties copied from the old
    one (proof included), holds none of the data: the batch is written again."""
    from pyiceberg.catalog import load_catalog

    assert run(sink, 0).status == "committed"
    old = load(catalog)
    properties = dict(old.metadata.properties)
    assert property_key("w") in properties
    cat = load_catalog("eosink", **catalog)
    cat.drop_table(TABLE)
    cat.create_table(TABLE, schema=old.schema(), properties=properties)
    assert property_key("w") in load(catalog).metadata.properties
    assert sink.is_committed(BatchContext(sink="iceberg", writer_id="w", batch_id=0)) is None
    assert run(sink, 0).status == "committed"
    assert ids(read_pyiceberg(catalog)) == [i for i in range(5)]


def _begin(sink: IcebergSink, batch: int):
    """An attempt prepared and written, not committed (a zombie's)."""
    pm = plugin_manager(sink)
    ctx = BatchContext(sink="iceberg", writer_id="w", batch_id=batch, query_id="q", checkpoint="/c")
    return pm, ctx, prepare(pm, ctx, rows(batch).schema).state


def _zombie_written_after_batch_0(sink, catalog, attempt: int):
    """Batch 0 committed, the table asking pyiceberg to retry failed commits, and a zombie's
    attempt ``attempt`` of batch 1 written (not committed): the zombie's sink, plugin manager,
    context, state and write results."""
    assert run(sink, 0).status == "committed"
    with load(catalog).transaction() as txn:
        txn.set_properties({"commit.retry.num-retries": "5", "commit.retry.min-wait-ms": "1"})
    zombie = IcebergSink(table=TABLE, catalog=catalog)
    pm, ctx, state = _begin(zombie, 1)
    batches = iter([rows(1)])
    results = [
        pm.hook.write(ctx=ctx, state=state, partition_id=0, attempt=attempt, batches=batches)
    ]
    return zombie, pm, ctx, state, results


def test_zombie_loses_even_where_the_table_asks_pyiceberg_to_retry(sink, catalog):
    """pyiceberg retries a failed commit by re-applying the same updates (files and proof
    property) on the new head without asking whether the batch is there: with the table's
    ``commit.retry.num-retries`` at 5 a zombie would commit the batch twice, if eosink let it."""
    _, pm, ctx, state, results = _zombie_written_after_batch_0(sink, catalog, attempt=7)
    assert run(sink, 1).status == "committed"  # the restarted driver's attempt
    # the zombie's commit, from the head it planned on: a conflict, then the proof says done
    from eosink.plugin import AlreadyCommitted

    with pytest.raises(AlreadyCommitted):
        pm.hook.commit(ctx=ctx, state=state, messages=results, proof=_proof(ctx))
    assert ids(read_pyiceberg(catalog)) == [*range(5), *range(1000, 1005)]


def _proof(ctx):
    from eosink.plugin import Proof

    return Proof(ctx.writer_id, ctx.batch_id, ctx.query_id, ctx.checkpoint, rows=5)


def test_zombie_committing_on_a_stale_head_is_refused_by_the_catalog(sink, catalog):
    """The race the proof check alone cannot close: the zombie checked the proof before the
    other attempt committed. The catalog refuses its commit (the main branch moved), the sink
    loads the table again, finds the proof, and publishes nothing; pyiceberg's own retry,
    which the table asks for here, would have re-applied the zombie's files on the new head."""
    zombie, pm, ctx, state, results = _zombie_written_after_batch_0(sink, catalog, attempt=3)
    real_decide = IcebergSink._decide
    calls = []

    def decide_then_lose_the_race(self, ctx_, state_):
        table = real_decide(self, ctx_, state_)
        if not calls:
            calls.append(1)
            assert run(sink, 1).status == "committed"  # lands between check and commit
        return table

    zombie._decide = decide_then_lose_the_race.__get__(zombie)
    from eosink.plugin import AlreadyCommitted

    with pytest.raises(AlreadyCommitted):
        zombie.commit(ctx, state, results, _proof(ctx))
    assert ids(read_pyiceberg(catalog)) == [*range(5), *range(1000, 1005)]
    assert len(load(catalog).metadata.snapshots) == 2


def test_two_writers_committing_at_once_both_land(catalog):
    """Different writer ids: the loser of the catalog's race loads the table again, checks its
    proof (not there) and commits on the new head."""
    barrier = threading.Barrier(2)
    outcomes, errors = [], []

    class Gate:
        @hookimpl(wrapper=True)
        def commit(self):
            barrier.wait(timeout=120)
            return (yield)

    IcebergSink(table=TABLE, catalog=catalog, create_namespace=True).init(
        BatchContext(sink="iceberg", writer_id="setup", batch_id=0), rows(0).schema
    )

    def attempt(writer: str) -> None:
        try:
            sink = IcebergSink(table=TABLE, catalog=catalog)
            ctx = BatchContext(sink="iceberg", writer_id=writer, batch_id=0, query_id=writer)
            outcomes.append(
                run_batch(sink, ctx, rows(0).schema, LocalRunner([[rows(0)]]), plugins=[Gate()])
            )
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=attempt, args=(w,)) for w in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert sorted(o.status for o in outcomes) == ["committed", "committed"]
    table = load(catalog)
    assert property_key("a") in table.metadata.properties
    assert property_key("b") in table.metadata.properties
    assert ids(read_pyiceberg(catalog)) == sorted([*range(5), *range(5)])


def test_complete_mode_replaces_the_table(sink, catalog):
    assert run(sink, 0).status == "committed"
    assert run(sink, 1, mode="complete").status == "committed"
    assert ids(read_pyiceberg(catalog)) == list(range(1000, 1005))
    assert run(sink, 2, mode="complete").status == "committed"
    assert ids(read_checked(catalog)) == list(range(2000, 2005))


def test_empty_batch_records_its_proof(sink, catalog):
    assert run(sink, 0, [rows(0, n=0)]).status == "committed"
    assert run(sink, 0).status == "skipped"
    assert read_pyiceberg(catalog).num_rows == 0


def test_merge_schema_adds_the_new_columns(catalog):
    first = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True)
    assert run(first, 0).status == "committed"
    wider = rows(1, score=pa.array([1.5] * 5))
    from eosink import ConfigurationError

    with pytest.raises(ConfigurationError, match="merge_schema"):
        run(first, 1, [wider])
    merging = IcebergSink(table=TABLE, catalog=catalog, merge_schema=True)
    assert run(merging, 1, [wider]).status == "committed"
    read = read_pyiceberg(catalog).to_pylist()
    assert sorted((r["id"], r["score"]) for r in read)[:1] == [(0, None)]
    assert {r["score"] for r in read if r["id"] >= 1000} == {1.5}


def test_commits_leave_pyicebergs_retry_setting_alone(sink, catalog):
    """Retries are off for eosink's commits only: the table's own setting is not written."""
    assert run(sink, 0).status == "committed"
    assert "commit.retry.num-retries" not in load(catalog).metadata.properties


def test_abort_of_a_failed_commit_deletes_its_files(sink, catalog, tmp_path):
    assert run(sink, 0).status == "committed"

    class Fails:
        @hookimpl(wrapper=True)
        def commit(self):
            raise RuntimeError("driver lost")
            yield  # noqa: unreachable - a wrapper must be a generator

    ctx = BatchContext(sink="iceberg", writer_id="w", batch_id=1, query_id="q")
    with pytest.raises(RuntimeError):
        run_batch(sink, ctx, rows(1).schema, LocalRunner([[rows(1)]]), plugins=[Fails()])
    data = tmp_path / "warehouse" / "lake" / "events" / "data"
    committed = {t.file.file_path.rsplit("/", 1)[-1] for t in load(catalog).scan().plan_files()}
    assert {p.name for p in data.iterdir()} == committed


@pytest.mark.skipif(duckdb_missing() is not None, reason=str(duckdb_missing()))
def test_duckdb_reads_every_type_the_sink_wrote(sink, catalog):
    """The independent reader itself (the other tests compare with it where it loads)."""
    import datetime as dt
    import decimal

    extra = {
        "d": pa.array([dt.date(2024, 1, i + 1) for i in range(5)]),
        "t": pa.array([dt.datetime(2024, 1, 1, i) for i in range(5)], pa.timestamp("us")),
        "m": pa.array([decimal.Decimal(f"{i}.25") for i in range(5)], pa.decimal128(8, 2)),
        "f": pa.array([0.5 * i for i in range(5)], pa.float32()),
    }
    assert run(sink, 0, [rows(0, **extra)]).status == "committed"
    got = sorted(read_duckdb(catalog).to_pylist(), key=lambda r: r["id"])
    assert [r["d"] for r in got] == extra["d"].to_pylist()
    assert [r["t"] for r in got] == extra["t"].to_pylist()
    assert [r["m"] for r in got] == extra["m"].to_pylist()
    assert [r["f"] for r in got] == extra["f"].to_pylist()


def test_a_tasks_batches_stream_into_one_file_per_partition_tuple(catalog):
    """Rows stream through a task a row group at a time: its many Arrow batches still make one
    file per partition tuple, each with several row groups."""
    import pyarrow.parquet as pq

    sink = IcebergSink(
        table=TABLE, catalog=catalog, create_namespace=True, partition_by=["name"], row_group_rows=3
    )
    parts = [
        pa.record_batch(
            {
                "id": pa.array([b * 10 + i for i in range(4)], pa.int64()),
                "name": pa.array(["a", "b", "a", None]),
            }
        )
        for b in range(5)
    ]
    pm = plugin_manager(sink)
    ctx = BatchContext(sink="iceberg", writer_id="w", batch_id=0, query_id="q")
    state = prepare(pm, ctx, parts[0].schema).state
    message = pm.hook.write(ctx=ctx, state=state, partition_id=0, attempt=1, batches=iter(parts))
    assert sorted(f.rows for f in message.files) == [5, 5, 10]
    assert message.rows == 20
    for f in message.files:
        metadata = pq.read_metadata(f.path.removeprefix("file://"))
        assert metadata.num_rows == f.rows and metadata.num_row_groups >= 2


@pytest.mark.parametrize("kind", [pa.float32(), pa.float64()])
def test_a_float_column_holding_nan_is_found_by_a_nan_filter(sink, catalog, kind):
    """A file of ``[1.5, NaN]``: pyarrow's footer statistics left NaN out (min = max = 1.5),
    and pyarrow, under pyiceberg's scan, took them to mean every value is 1.5 and skipped the
    row group for ``isnan`` (and ``> 1.5 or isnan``). Iceberg's own writer (parquet-mr) writes
    NaN as that row group's max, so the same rows read fine there. The manifest still bounds
    the column (NaN left out, as the spec says) and counts its NaNs and nulls."""
    from pyiceberg.expressions import GreaterThan, IsNaN, IsNull, Or

    values = pa.array([1.5, float("nan")], kind)
    assert run(sink, 0, [rows(0, n=2, f=values)]).status == "committed"
    table = load(catalog)
    for row_filter, want in (
        (IsNaN("f"), [1]),
        (Or(GreaterThan("f", 1.5), IsNaN("f")), [1]),
        (IsNull("f"), []),
    ):
        got = table.scan(row_filter=row_filter).to_arrow().column("id").to_pylist()
        assert sorted(got) == want, row_filter
    (task,) = table.scan().plan_files()
    field = table.schema().find_field("f").field_id
    assert task.file.nan_value_counts[field] == 1
    assert task.file.null_value_counts[field] == 0
    from pyiceberg.conversions import from_bytes

    field_type = table.schema().find_field("f").field_type
    assert from_bytes(field_type, task.file.lower_bounds[field]) == 1.5
    assert from_bytes(field_type, task.file.upper_bounds[field]) == 1.5


def test_a_value_the_footer_does_not_bound_leaves_the_column_unbounded(catalog):
    """Found by a soak (seed 2350168046): pyarrow writes no min/max for a row group whose
    string is over 4 KiB, and pyiceberg's aggregation of the footer skipped that row group,
    so the file's bounds left out a value it holds: ``WHERE s = <that value>`` returned 0 of
    1 rows. A row group without bounds must make the file's bounds of that column absent,
    never narrower (its other columns keep theirs)."""
    from pyiceberg.expressions import EqualTo

    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, row_group_rows=1)
    long = "s" * 4099
    batch = pa.record_batch(
        {"id": pa.array([0, 1, 2], pa.int64()), "s": pa.array([long, "0", "0"])}
    )
    assert run(sink, 0, [batch]).status == "committed"
    table = load(catalog)
    assert table.scan(row_filter=EqualTo("s", long)).to_arrow().column("id").to_pylist() == [0]
    assert table.scan(row_filter=EqualTo("s", "0")).to_arrow().num_rows == 2
    (task,) = table.scan().plan_files()
    s, i = (table.schema().find_field(n).field_id for n in ("s", "id"))
    assert s not in task.file.lower_bounds and s not in task.file.upper_bounds
    assert i in task.file.lower_bounds and i in task.file.upper_bounds
