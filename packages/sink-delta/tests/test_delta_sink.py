"""The delta sink without Spark: batch-job versions (Delta's txnAppId/txnVersion), the log's
contents, modes, types, retention, races."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections import Counter

import pyarrow as pa
import pytest
import structlog
from deltalake import DeltaTable, write_deltalake
from deltalake.transaction import CommitProperties, Transaction
from eosink_delta import proof as proof_module
from eosink_delta.sink import DeltaSink, read_table
from delta_helpers import QUERY, commit_elsewhere, log_actions, rows, run, txns
from delta_history import age_log

import eosink
from eosink.plugin import AlreadyCommitted, BatchContext, Proof
from eosink.registry import plugin_manager


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "table")


def ids(path):
    return sorted(read_table(path).column("id").to_pylist())


def test_entry_point_finds_the_sink(path):
    sink = eosink.sink("delta", path=path, partitionBy="name")
    assert isinstance(sink, DeltaSink)
    assert sink.options.partition_by == ("name",)


def test_seed_002_daily_etl(path):
    """dailyETL 23424 writes; 23422 (and 23424 again) is skipped and logged; anotherETL writes."""
    sink = DeltaSink(path=path)
    with structlog.testing.capture_logs() as events:
        statuses = [
            run(sink, 23424, [rows(1)], writer_id="dailyETL", kind="batch").status,
            run(sink, 23422, [rows(2)], writer_id="dailyETL", kind="batch").status,
            run(sink, 23424, [rows(1)], writer_id="dailyETL", kind="batch").status,
            run(sink, 23424, [rows(1)], writer_id="anotherETL", kind="batch").status,
        ]
    assert statuses == ["committed", "skipped", "skipped", "committed"]
    assert Counter(ids(path)) == Counter(rows(1).column("id").to_pylist() * 2)
    assert txns(path) == [("dailyETL", 23424), ("anotherETL", 23424)]
    skipped = [e for e in events if e["event"] == "batch.skipped"]
    assert [(e["writer"], e["batch"]) for e in skipped] == [
        ("dailyETL", 23422),
        ("dailyETL", 23424),
    ]
    assert all("committed up to batch 23424" in e["reason"] for e in skipped)
    table = DeltaTable(path)
    assert table.transaction_version("dailyETL") == 23424
    assert table.transaction_version("anotherETL") == 23424


def test_one_commit_with_txn_and_proof_per_batch(path):
    sink = DeltaSink(path=path)
    for batch in range(3):
        run(sink, batch, [rows(batch, 3), rows(batch + 100, 2)])
    run(sink, 1)  # a replay: skipped, no commit
    actions = log_actions(path)
    assert txns(path) == [("w", 0), ("w", 1), ("w", 2)]
    for version in (1, 2, 3):  # version 0 created the table
        commit = [a for v, a in actions if v == version]
        (info,) = [a["commitInfo"] for a in commit if "commitInfo" in a]
        proof = Proof.from_json(info["eosink.proof"])
        (txn,) = [a["txn"] for a in commit if "txn" in a]
        assert (proof.writer_id, proof.batch_id, proof.query_id) == ("w", txn["version"], QUERY)
        assert proof.rows == 5
        adds = [a["add"] for a in commit if "add" in a]
        assert len(adds) == 2
        stats = [json.loads(a["stats"]) for a in adds]
        assert sorted(s["numRecords"] for s in stats) == [2, 3]
        assert all(s["minValues"]["id"] <= s["maxValues"]["id"] for s in stats)
        assert all(s["nullCount"] == {"id": 0, "name": 0} for s in stats)
    assert DeltaTable(path).version() == 3


def test_is_committed_reads_the_proof_of_the_exact_batch(path):
    sink = DeltaSink(path=path)
    for batch in range(3):
        run(sink, batch)
    hook = plugin_manager(sink).hook
    ctx = BatchContext(sink="delta", writer_id="w", batch_id=1, query_id=QUERY)
    proof = hook.is_committed(ctx=ctx)
    assert (proof.batch_id, proof.query_id, proof.rows) == (1, QUERY, 5)
    assert hook.is_committed(ctx=BatchContext(sink="delta", writer_id="w", batch_id=3)) is None
    assert hook.is_committed(ctx=BatchContext(sink="delta", writer_id="x", batch_id=0)) is None


def test_complete_mode_replaces_the_content_in_the_same_commit(path):
    sink = DeltaSink(path=path)
    run(sink, 0, [rows(0, 4)], mode="complete")
    run(sink, 1, [rows(1, 2)], mode="complete")
    assert ids(path) == rows(1, 2).column("id").to_pylist()
    last = [a for v, a in log_actions(path) if v == DeltaTable(path).version()]
    assert sum("remove" in a for a in last) == 1 and sum("add" in a for a in last) == 1
    assert [a["txn"]["version"] for a in last if "txn" in a] == [1]
    assert run(sink, 1, [rows(1, 2)], mode="complete").status == "skipped"


class CompactAtCommitChecked:
    """delta-rs compacts the table inside the commit, after its checks (``commit:checked``):
    the batch's snapshot names files that are gone by the time it is published."""

    def __init__(self, path: str) -> None:
        self.path, self.done = path, False

    def act(self, point: str) -> None:
        if point == "commit:checked" and not self.done:
            self.done = True
            DeltaTable(self.path).optimize.compact()


def test_complete_mode_over_a_compaction_inside_its_commit_holds_the_batch_only(path):
    """A compaction that lands between the complete commit's snapshot and its publication
    rewrote the previous batch's rows into a file the snapshot does not name: the commit
    must not leave that file beside the batch (readers would see both batches)."""
    from eosink.crash import set_crash_handler

    sink = DeltaSink(path=path)
    run(sink, 0, [rows(0, 2), rows(0, 2).slice(1)], mode="complete")  # two files
    compact = CompactAtCommitChecked(path)
    set_crash_handler(compact.act)
    try:
        outcome = run(sink, 1, [rows(1, 3)], mode="complete")
    finally:
        set_crash_handler(None)
    assert compact.done
    if outcome.status != "committed":  # a conflict, nothing committed: the replay lands
        assert run(sink, 1, [rows(1, 3)], mode="complete").status == "committed"
    assert ids(path) == rows(1, 3).column("id").to_pylist()


def test_partitioned_table_layout_and_values(path):
    day = pa.array(["2024-01-01", "2024-01-02", None, "a b/c%", "2024-01-01"])
    sink = DeltaSink(path=path, partition_by=["day"])
    run(sink, 0, [rows(0, day=day)])
    table = DeltaTable(path)
    assert table.metadata().partition_columns == ["day"]
    got = sorted((r["id"], r["day"]) for r in read_table(path).to_pylist())
    assert got == sorted(zip(rows(0).column("id").to_pylist(), day.to_pylist()))
    adds = [a["add"] for _, a in log_actions(path) if "add" in a]
    assert len(adds) == 4  # one file per partition value in the task
    values = {a["partitionValues"]["day"] for a in adds}
    assert values == {"2024-01-01", "2024-01-02", None, "a b/c%"}
    # A later sink without partitionBy uses the table's partitioning.
    run(DeltaSink(path=path), 1, [rows(1, day=day)])
    assert len(ids(path)) == 10


def test_spark_time_zones_and_naive_timestamps(path):
    """Spark hands 'Etc/UTC' (or the session's zone); delta-rs takes 'UTC': same instants."""
    instants = [0, 1_700_000_000_123_456, 1_500_000_000_000_001, 86_400_000_000, None]
    batch = rows(
        0,
        ts=pa.array(instants, pa.timestamp("us", tz="Etc/UTC")),
        local=pa.array(instants, pa.timestamp("us", tz="America/New_York")),
        ntz=pa.array(instants, pa.timestamp("us")),
        day=pa.array([dt.date(2024, 1, d + 1) for d in range(5)]),
    )
    sink = DeltaSink(path=path)
    run(sink, 0, [batch])
    schema = DeltaTable(path).schema().to_json()
    types = {f["name"]: f["type"] for f in json.loads(schema)["fields"]}
    assert [types[c] for c in ("ts", "local", "ntz")] == ["timestamp", "timestamp", "timestamp_ntz"]
    back = read_table(path).sort_by("id")
    assert back.column("ts").cast(pa.int64()).to_pylist() == instants
    assert back.column("local").cast(pa.int64()).to_pylist() == instants
    assert back.column("ntz").cast(pa.int64()).to_pylist() == instants
    # Another session time zone on the next batch is the same column type.
    later = rows(
        1,
        ts=pa.array(instants, pa.timestamp("us", tz="Europe/Berlin")),
        local=pa.array(instants, pa.timestamp("us", tz="UTC")),
        ntz=pa.array(instants, pa.timestamp("us")),
        day=pa.array([dt.date(2024, 2, d + 1) for d in range(5)]),
    )
    assert run(sink, 1, [later]).status == "committed"
    stats = [json.loads(a["add"]["stats"]) for _, a in log_actions(path) if "add" in a]
    assert stats[0]["minValues"]["ts"] == "1970-01-01T00:00:00.000Z"
    assert stats[0]["maxValues"]["ts"] == "2023-11-14T22:13:20.124Z"  # rounded up to the ms
    assert stats[0]["minValues"]["day"] == "2024-01-01"


def test_merge_schema_adds_new_columns(path):
    run(DeltaSink(path=path), 0)
    wider = rows(1, score=pa.array([1.5] * 5))
    with pytest.raises(eosink.ConfigurationError, match="mergeSchema=true"):
        run(DeltaSink(path=path), 1, [wider])
    assert run(DeltaSink(path=path, merge_schema=True), 1, [wider]).status == "committed"
    back = read_table(path).sort_by("id").to_pylist()
    assert [r["score"] for r in back] == [None] * 5 + [1.5] * 5


def test_narrower_types_widen_and_missing_nullable_columns_are_null(path):
    run(DeltaSink(path=path), 0)
    narrow = pa.record_batch({"id": pa.array([7, 8], pa.int32())})
    assert run(DeltaSink(path=path), 1, [narrow]).status == "committed"
    back = {r["id"]: r["name"] for r in read_table(path).to_pylist()}
    assert back[7] is None and back[8] is None and len(back) == 7


def test_a_txn_with_last_updated_would_expire(tmp_path):
    """delta-rs, too, drops a txn whose lastUpdated is past the retention: hence eosink's floor
    on the retention (test_txn_retention.py)."""
    path = str(tmp_path / "t")
    write_deltalake(
        path,
        pa.table({"id": [1]}),
        configuration={"delta.setTransactionRetentionDuration": "interval 1 seconds"},
        commit_properties=CommitProperties(
            app_transactions=[Transaction("w", 5, int(time.time() * 1000))]
        ),
    )
    time.sleep(1.5)
    assert DeltaTable(path).transaction_version("w") is None


def test_concurrent_commit_by_the_same_writer_loses_cleanly(path):
    """Our commit checks the txn; another attempt commits the batch; delta-rs refuses ours.

    delta-rs would accept a second txn of the same app id on a fresh snapshot: the check in
    commit prevents that, and the window between check and commit is closed by delta-rs'
    conflict detection, which the sink turns into AlreadyCommitted.
    """
    from eosink.crash import set_crash_handler

    sink = DeltaSink(path=path)
    run(sink, 0)

    def race(point: str) -> None:
        if point == "commit:checked":
            commit_elsewhere(path, 1)

    set_crash_handler(race)
    try:
        outcome = run(sink, 1)
    finally:
        set_crash_handler(None)
    assert outcome.status == "skipped"
    assert "concurrent commit" in outcome.reason
    assert txns(path) == [("w", 0), ("w", 1)]
    assert len(ids(path)) == 10


def test_abort_removes_only_files_no_commit_published(path):
    from eosink.testing.faults import FaultPlugin, InjectedCrash

    sink = DeltaSink(path=path)
    run(sink, 0)
    with pytest.raises(InjectedCrash):
        run(sink, 1, plugins=(FaultPlugin("before_commit"),))
    with pytest.raises(InjectedCrash):
        run(sink, 2, plugins=(FaultPlugin("after_commit"),))
    import glob
    import os

    on_disk = {os.path.relpath(p, path) for p in glob.glob(f"{path}/*.parquet")}
    in_log = set(DeltaTable(path).file_uris())
    assert {os.path.relpath(u.removeprefix("file://"), path) for u in in_log} == on_disk
    assert len(ids(path)) == 10


def test_proof_details_found_across_many_commits(path, monkeypatch):
    monkeypatch.setattr(proof_module, "HISTORY_STEP", 2)
    sink = DeltaSink(path=path)
    run(sink, 0)
    for batch in range(5):
        run(sink, batch, writer_id="busy")
    proof = plugin_manager(sink).hook.is_committed(
        ctx=BatchContext(sink="delta", writer_id="w", batch_id=0)
    )
    assert (proof.batch_id, proof.query_id) == (0, QUERY)


def test_already_committed_raised_by_commit_itself(path):
    sink = DeltaSink(path=path)
    run(sink, 3)
    ctx = BatchContext(sink="delta", writer_id="w", batch_id=2)
    state = sink.init(ctx=ctx, schema=rows(2).schema)
    with pytest.raises(AlreadyCommitted):
        sink.commit(ctx=ctx, state=state, messages=[], proof=Proof("w", 2))


def test_replay_is_skipped_after_log_retention_removed_its_commits(path):
    """The txn survives in the checkpoint; the commits that carried it (and the proof) are gone."""
    sink = DeltaSink(path=path)
    for batch in range(3):
        run(sink, batch)
    run(sink, 0, writer_id="other")
    DeltaTable(path).create_checkpoint()
    age_log(path, 31)  # older than delta.logRetentionDuration's default of 30 days
    DeltaTable(path).cleanup_metadata()
    assert txns(path) == [("other", 0)]  # no commit JSON with a txn of "w" is left
    assert DeltaTable(path).transaction_version("w") == 2
    with structlog.testing.capture_logs() as events:
        assert run(sink, 2).status == "skipped"
        assert run(sink, 1).status == "skipped"
    assert "delta.proof_without_details" in [e["event"] for e in events]
    assert run(sink, 3).status == "committed"
    assert len(ids(path)) == 25


def test_commit_where_is_committed_ran_in_another_process(tmp_path):
    """The data-source front door asks is_committed in one Python process and commits in
    another: the committing process's kept snapshot predates its own last commit (delta-rs does
    not move a handle with its commits), so commit must bring it up to date itself."""
    sink = DeltaSink(path=str(tmp_path / "t"))
    assert run(sink, 0).status == "committed"
    ctx = BatchContext(sink="delta", writer_id="w", batch_id=1, kind="stream", query_id=QUERY)
    batch = rows(1)
    state = sink.init(ctx, batch.schema)
    message = sink.write(state, 0, 0, iter([batch]))
    sink.commit(ctx, state, [message], Proof(writer_id="w", batch_id=1, query_id=QUERY))
    assert txns(str(tmp_path / "t")) == [("w", 0), ("w", 1)]
