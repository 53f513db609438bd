"""Keyed upserts (mode="upsert", key=[...]) on the delta-rs engine: MERGE semantics in one Delta
commit written by eosink's own log writer, read back by delta-rs, delta-kernel-rs and DuckDB."""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import polars_deltalake
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from delta_helpers import duckdb_with_delta, log_actions, log_version, run, txns
from eosink_delta.sink import DeltaSink

from eosink.crash import set_crash_handler
from eosink.plugin import ConfigurationError
from eosink.registry import plugin_manager
from eosink.testing.faults import InjectedCrash


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "table")


def users(ids: list[int], tag: str, part: list[str] | None = None) -> pa.RecordBatch:
    """Rows keyed by ``user_id``; ``v`` says which batch wrote them."""
    columns: dict[str, Any] = {
        "user_id": pa.array(ids, pa.int64()),
        "v": pa.array([f"{tag}-{i}" for i in ids], pa.string()),
    }
    if part is not None:
        columns["p"] = pa.array(part, pa.string())
    return pa.record_batch(columns)


def upsert_sink(path: str, **options: Any) -> DeltaSink:
    return DeltaSink(path=path, mode="upsert", key=options.pop("key", ["user_id"]), **options)


def by_key(rows: list[dict[str, Any]], key: str = "user_id") -> dict[Any, dict[str, Any]]:
    """The rows by key; fails when a key is held twice (an accumulation, not a replace)."""
    out: dict[Any, dict[str, Any]] = {}
    for row in rows:
        assert row[key] not in out, f"key {row[key]} held twice: {rows}"
        out[row[key]] = row
    return out


def read_delta_rs(path: str, where: str | None = None) -> list[dict[str, Any]]:
    if where is None:
        return DeltaTable(path).to_pyarrow_table().to_pylist()
    query = QueryBuilder().register("t", DeltaTable(path))
    return pa.table(query.execute(f"select * from t where {where}").read_all()).to_pylist()


def read_kernel(path: str, where: str | None = None) -> list[dict[str, Any]]:
    frame = polars_deltalake.scan_delta(path)
    if where is not None:
        frame = frame.sql(f"select * from self where {where}")
    return frame.collect().to_dicts()


def read_duckdb(path: str, where: str | None = None) -> list[dict[str, Any]]:
    query = f"select * from delta_scan('{path}')" + (f" where {where}" if where else "")
    cursor = duckdb_with_delta().execute(query)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


READERS = {"delta-rs": read_delta_rs, "delta-kernel-rs": read_kernel, "duckdb": read_duckdb}


def values(path: str, reader=read_delta_rs, where: str | None = None) -> dict[int, str]:
    return {k: r["v"] for k, r in by_key(reader(path, where)).items()}


def commits(path: str) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for version, action in log_actions(path):
        out.setdefault(version, []).append(action)
    return out


def kinds(actions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [a[kind] for a in actions if kind in a]


# -- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, fix",
    [
        ({"mode": "upsert"}, "mode 'upsert' needs option key"),
        ({"key": ["user_id"]}, "option key is for mode 'upsert'"),
        ({"order_by": "at"}, "option order_by is for mode 'upsert'"),
        ({"mode": "upsert", "key": "a, b, a"}, "names a column twice"),
        ({"mode": "upsert", "key": "a", "order_by": "a"}, "is a key column"),
        ({"mode": "merge", "key": "a"}, "mode 'merge' is unknown"),
    ],
)
def test_options_refused_at_construction_naming_the_fix(path, options, fix):
    with pytest.raises(ConfigurationError, match=fix):
        DeltaSink(path=path, **options)


def test_upsert_key_hook(path):
    """The core asks the sink for its key (Spark's update output mode needs one)."""
    keyed = DeltaSink(path=path, mode="upsert", key="user_id, region")
    assert plugin_manager(keyed).hook.upsert_key() == ("user_id", "region")
    assert plugin_manager(DeltaSink(path=path)).hook.upsert_key() is None


def test_key_missing_from_the_stream_refused_before_anything_is_written(path):
    with pytest.raises(ConfigurationError, match=r"key column\(s\) \['user'\] are not in"):
        run(upsert_sink(path, key=["user"]), 0, [users([1], "b0")])
    assert not os.path.exists(path)


def test_key_missing_from_the_table_refused_naming_the_fix(path):
    write_deltalake(path, pa.Table.from_batches([users([1], "x")]))
    batch = users([1], "b0").append_column("region", pa.array(["eu"]))
    with pytest.raises(
        ConfigurationError, match=r"key column\(s\) \['region'\] are not in the table"
    ):
        run(upsert_sink(path, key=["user_id", "region"]), 0, [batch])
    assert values(path) == {1: "x-1"}


def test_floating_key_refused(path):
    batch = pa.record_batch({"x": pa.array([1.5]), "v": pa.array(["a"])})
    with pytest.raises(ConfigurationError, match="floating-point"):
        run(upsert_sink(path, key=["x"]), 0, [batch])


def test_complete_mode_refused(path):
    with pytest.raises(ConfigurationError, match="complete output mode"):
        run(upsert_sink(path), 0, [users([1], "b0")], mode="complete")
    assert not os.path.exists(path)


def test_append_only_table_refused(path):
    write_deltalake(
        path, pa.Table.from_batches([users([1], "x")]), configuration={"delta.appendOnly": "true"}
    )
    with pytest.raises(ConfigurationError, match="append-only"):
        run(upsert_sink(path), 0, [users([1], "b0")])
    assert values(path) == {1: "x-1"}


# -- replace semantics -----------------------------------------------------------------------


def test_batches_replace_rows_by_key_and_every_reader_agrees(path):
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2, 3], "b0"), users([4, 5], "b0")])
    run(sink, 1, [users([4, 6], "b1"), users([1], "b1")])
    run(sink, 2, [users([6, 7, 2], "b2")])
    expected = {1: "b1-1", 2: "b2-2", 3: "b0-3", 4: "b1-4", 5: "b0-5", 6: "b2-6", 7: "b2-7"}
    for reader in READERS.values():
        assert values(path, reader) == expected, reader
        assert values(path, reader, where="user_id = 4") == {4: "b1-4"}, reader
        assert values(path, reader, where="user_id = 6") == {6: "b2-6"}, reader
    assert txns(path) == [("w", 0), ("w", 1), ("w", 2)]
    last = commits(path)[log_version(path)]
    info = kinds(last, "commitInfo")[0]
    assert (info["operation"], info["isBlindAppend"]) == ("MERGE", False)
    assert kinds(last, "remove")  # batch 2 replaced rows of files it removed


def test_a_replayed_batch_is_skipped_and_the_table_unchanged(path):
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2], "b0")])
    run(sink, 1, [users([2, 3], "b1")])
    version = log_version(path)
    outcome = run(sink, 1, [users([2, 3], "replay")])
    assert outcome.status == "skipped"
    assert log_version(path) == version
    assert values(path) == {1: "b0-1", 2: "b1-2", 3: "b1-3"}


def test_the_survivors_keep_every_column_of_the_table(path):
    """A batch without a column of the table writes it null in its rows (replace), and the
    rewritten rows of other keys keep theirs."""
    first = users([1, 2], "b0").append_column("extra", pa.array(["e1", "e2"]))
    sink = upsert_sink(path)
    run(sink, 0, [first])
    run(sink, 1, [users([1], "b1")])
    rows = by_key(read_delta_rs(path))
    assert (rows[1]["v"], rows[1]["extra"]) == ("b1-1", None)
    assert (rows[2]["v"], rows[2]["extra"]) == ("b0-2", "e2")


def test_crash_between_rewrite_and_commit_leaves_nothing_visible(path):
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2, 3], "b0")])
    version = log_version(path)

    def crash(point: str) -> None:
        if point == "commit:rewritten":
            raise InjectedCrash("between rewrite and commit")

    set_crash_handler(crash)
    try:
        with pytest.raises(InjectedCrash):
            run(sink, 1, [users([2, 4], "b1")])
    finally:
        set_crash_handler(None)
    assert log_version(path) == version
    for reader in READERS.values():
        assert values(path, reader) == {1: "b0-1", 2: "b0-2", 3: "b0-3"}
    # the restarted query writes the batch again (a new attempt)
    assert run(upsert_sink(path), 1, [users([2, 4], "b1")]).status == "committed"
    for reader in READERS.values():
        assert values(path, reader) == {1: "b0-1", 2: "b1-2", 3: "b0-3", 4: "b1-4"}


# -- one batch's rows ------------------------------------------------------------------------


def test_a_key_twice_in_one_batch_is_refused_naming_it(path):
    sink = upsert_sink(path)
    run(sink, 0, [users([1], "b0")])
    version = log_version(path)
    with pytest.raises(ConfigurationError, match=r"holds key \(user_id=2\) more than once"):
        run(sink, 1, [users([2, 3], "b1"), users([2], "b1")])
    assert log_version(path) == version
    assert values(path) == {1: "b0-1"}


def test_order_by_picks_the_greatest_row_of_a_key(path):
    def batch(ids: list[int], seq: list[int], tag: str) -> pa.RecordBatch:
        return users(ids, tag).append_column("seq", pa.array(seq, pa.int64()))

    sink = upsert_sink(path, order_by="seq")
    run(sink, 0, [batch([1, 2], [5, 5], "old")])
    run(sink, 1, [batch([1, 2, 1], [7, 1, 9], "a"), batch([1, 3, 2], [8, 1, 3], "b")])
    rows = by_key(read_delta_rs(path))
    assert {k: (r["v"], r["seq"]) for k, r in rows.items()} == {
        1: ("a-1", 9),
        2: ("b-2", 3),
        3: ("b-3", 1),
    }
    # the staged file that held the losing rows is replaced by one without them
    live = {os.path.basename(u) for u in DeltaTable(path).file_uris()}
    on_disk = {os.path.basename(p) for p in glob.glob(f"{path}/*.parquet")}
    assert live <= on_disk
    with pytest.raises(ConfigurationError, match=r"same greatest seq=4"):
        run(sink, 2, [batch([1, 1], [4, 4], "tie")])


def test_a_null_key_is_refused(path):
    batch = pa.record_batch({"user_id": pa.array([1, None], pa.int64()), "v": ["a", "b"]})
    with pytest.raises(ConfigurationError, match=r"null key column \['user_id'\]"):
        run(upsert_sink(path), 0, [batch])
    assert DeltaTable(path).to_pyarrow_table().num_rows == 0


# -- partitions ------------------------------------------------------------------------------


def test_key_with_the_partition_column(path):
    sink = upsert_sink(path, key=["p", "user_id"], partition_by=["p"])
    run(sink, 0, [users([1, 2, 1], "b0", ["a", "a", "b"])])
    run(sink, 1, [users([1], "b1", ["b"])])
    for reader in READERS.values():
        rows = reader(path)
        assert sorted((r["p"], r["user_id"], r["v"]) for r in rows) == [
            ("a", 1, "b0-1"),
            ("a", 2, "b0-2"),
            ("b", 1, "b1-1"),
        ], reader
    removed = kinds(commits(path)[log_version(path)], "remove")
    assert [r["partitionValues"] for r in removed] == [{"p": "b"}]  # partition a untouched


def test_key_without_the_partition_column_moves_a_row_between_partitions(path):
    sink = upsert_sink(path, partition_by=["p"])
    run(sink, 0, [users([1, 2, 3], "b0", ["a", "a", "b"])])
    run(sink, 1, [users([1], "b1", ["b"])])
    for reader in READERS.values():
        rows = by_key(reader(path))
        assert {k: (r["p"], r["v"]) for k, r in rows.items()} == {
            1: ("b", "b1-1"),
            2: ("a", "b0-2"),
            3: ("b", "b0-3"),
        }, reader


# -- cost ------------------------------------------------------------------------------------


def test_one_key_of_a_50_file_table_rewrites_only_the_file_holding_it(path):
    sink = upsert_sink(path)
    for batch in range(50):
        run(sink, batch, [users(list(range(batch * 10, batch * 10 + 10)), f"b{batch}")])
    assert len(DeltaTable(path).file_uris()) == 50
    import structlog

    with structlog.testing.capture_logs() as events:
        run(sink, 50, [users([123], "b50")])
    (done,) = [e for e in events if e["event"] == "delta.upsert_committed"]
    assert (done["files_read"], done["files_rewritten"]) == (1, 1)  # of 50
    last = commits(path)[log_version(path)]
    assert len(kinds(last, "remove")) == 1
    assert len(kinds(last, "add")) == 2  # the file's other 9 rows, and the batch's row
    table = values(path)
    assert len(table) == 500 and table[123] == "b50-123" and table[124] == "b12-124"


def test_a_rewrite_keeps_each_files_other_rows_in_a_file_of_their_own(path):
    """A batch touching keys of several files rewrites each file's other rows into a file of
    its own, within that file's key bounds: gathered into one file, the untouched rows of the
    whole table would end up in a file every later batch reads and rewrites (the cost of a
    batch would grow with the table, not with the batch)."""
    sink = upsert_sink(path)
    for batch in range(4):  # four files: keys 0-9, 10-19, 20-29, 30-39
        run(sink, batch, [users(list(range(batch * 10, batch * 10 + 10)), f"b{batch}")])
    run(sink, 4, [users([5, 15, 25, 35], "b4")])  # one key of each file
    last = commits(path)[log_version(path)]
    assert len(kinds(last, "remove")) == 4
    survivors = [json.loads(a["stats"]) for a in kinds(last, "add") if a["stats"]]
    bounds = sorted((s["minValues"]["user_id"], s["maxValues"]["user_id"]) for s in survivors)
    assert bounds == [(0, 9), (5, 35), (10, 19), (20, 29), (30, 39)]  # 4 survivors + the batch
    import structlog

    with structlog.testing.capture_logs() as events:
        run(sink, 5, [users([7], "b5")])  # a key of the first file only
    (done,) = [e for e in events if e["event"] == "delta.upsert_committed"]
    assert done["files_rewritten"] == 1
    last = commits(path)[log_version(path)]
    (removed,) = kinds(last, "remove")
    added = {a["path"]: a for actions in commits(path).values() for a in kinds(actions, "add")}
    stats = json.loads(added[removed["path"]]["stats"])
    assert stats["numRecords"] == 9  # keys 0-9 but 5: not the table's 36 other rows
    table = values(path)
    assert len(table) == 40 and table[7] == "b5-7" and table[5] == "b4-5" and table[8] == "b0-8"


def test_a_file_without_stats_is_read_as_if_it_held_any_key(path):
    run(upsert_sink(path, stats=False), 0, [users([1, 2], "b0")])
    run(upsert_sink(path), 1, [users([9], "b1")])  # has stats: not touched by batch 2
    run(upsert_sink(path), 2, [users([2], "b2")])
    assert values(path) == {1: "b0-1", 2: "b2-2", 9: "b1-9"}
    last = commits(path)[log_version(path)]
    assert len(kinds(last, "remove")) == 1


# -- other writers between plan and commit ---------------------------------------------------


def race_at_rewritten(step):
    calls = []

    def handler(point: str) -> None:
        if point == "commit:rewritten" and not calls:
            calls.append(point)
            step()

    return handler, calls


def test_foreign_append_of_a_batch_key_between_plan_and_commit_is_replaced(path):
    """The batch commits after the foreign append: MERGE semantics say its row wins."""
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2], "b0")])

    def foreign() -> None:
        write_deltalake(path, pa.Table.from_batches([users([2, 8], "foreign")]), mode="append")

    handler, calls = race_at_rewritten(foreign)
    set_crash_handler(handler)
    try:
        import structlog

        with structlog.testing.capture_logs() as events:
            assert run(sink, 1, [users([2, 3], "b1")]).status == "committed"
    finally:
        set_crash_handler(None)
    assert calls
    replanned = [e for e in events if e["event"] == "delta.upsert_replanned"]
    assert len(replanned) == 1 and "may hold a key of the batch" in replanned[0]["reason"]
    for reader in READERS.values():
        assert values(path, reader) == {1: "b0-1", 2: "b1-2", 3: "b1-3", 8: "foreign-8"}


def test_foreign_append_of_other_keys_does_not_replan(path):
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2], "b0")])

    def foreign() -> None:
        write_deltalake(path, pa.Table.from_batches([users([50, 60], "foreign")]), mode="append")

    handler, calls = race_at_rewritten(foreign)
    set_crash_handler(handler)
    try:
        import structlog

        with structlog.testing.capture_logs() as events:
            run(sink, 1, [users([2], "b1")])
    finally:
        set_crash_handler(None)
    assert not [e for e in events if e["event"] == "delta.upsert_replanned"]
    assert values(path) == {1: "b0-1", 2: "b1-2", 50: "foreign-50", 60: "foreign-60"}


def test_concurrent_optimize_that_removed_a_touched_file_replans(path):
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2], "b0")])
    run(sink, 1, [users([3, 4], "b1")])

    def optimize() -> None:
        DeltaTable(path).optimize.compact()

    handler, calls = race_at_rewritten(optimize)
    set_crash_handler(handler)
    try:
        import structlog

        with structlog.testing.capture_logs() as events:
            assert run(sink, 2, [users([2, 5], "b2")]).status == "committed"
    finally:
        set_crash_handler(None)
    assert [e for e in events if e["event"] == "delta.upsert_replanned"]
    for reader in READERS.values():
        assert values(path, reader) == {1: "b0-1", 2: "b2-2", 3: "b1-3", 4: "b1-4", 5: "b2-5"}


def test_the_commit_is_eosinks_own_with_the_proof(path):
    sink = upsert_sink(path)
    run(sink, 0, [users([1], "b0")])
    run(sink, 1, [users([1], "b1")])
    last = commits(path)[log_version(path)]
    info = kinds(last, "commitInfo")[0]
    assert info["engineInfo"] == "eosink-delta"
    assert json.loads(info["eosink.proof"])["batch_id"] == 1
    assert kinds(last, "txn")[0]["version"] == 1


# -- the log's other shapes ------------------------------------------------------------------


def test_files_are_found_from_a_checkpoint_in_a_new_process(path):
    """The file index is read from the newest checkpoint (its add actions) and the commits
    after it: rows in checkpointed files are replaced too."""
    from eosink_delta.snapshot import forget

    write_deltalake(
        path,
        pa.Table.from_batches([users([100, 101], "x")]),
        configuration={"delta.checkpointInterval": "3"},
    )
    sink = upsert_sink(path)
    for batch in range(4):
        run(sink, batch, [users([batch, 100 + batch % 2], f"b{batch}")])
    assert glob.glob(f"{path}/_delta_log/*.checkpoint.parquet")
    forget(path)  # as a new driver process would
    run(upsert_sink(path), 4, [users([0, 101], "b4")])
    for reader in READERS.values():
        assert values(path, reader) == {
            0: "b4-0",
            1: "b1-1",
            2: "b2-2",
            3: "b3-3",
            100: "b2-100",
            101: "b4-101",
        }


def append_commit(path: str, actions: list[dict[str, Any]]) -> None:
    """A commit of another Delta writer, written as its log file."""
    name = f"{path}/_delta_log/{log_version(path) + 1:020d}.json"
    with open(name, "x") as f:
        f.write("\n".join(json.dumps(a) for a in actions) + "\n")


@pytest.mark.parametrize("add_first", [True, False])
def test_a_file_with_a_deletion_vector_is_refused_by_name(path, add_first):
    """Another engine (Delta's Spark connector, a DELETE) left a deletion vector on a file that
    holds a key of the batch: rewriting it without the vector would bring deleted rows back.
    Delta's DELETE writes the add of the file with its vector before the remove of the file
    without it (``test_jvm_upsert.py``): the file stays live either way."""
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2], "b0")])
    (add,) = kinds(commits(path)[log_version(path)], "add")
    features = ["deletionVectors"]
    append_commit(
        path,
        [
            {"commitInfo": {"operation": "SET TBLPROPERTIES"}},
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": features,
                    "writerFeatures": features,
                }
            },
        ],
    )
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 4,
        "sizeInBytes": 40,
        "cardinality": 1,
    }
    remove = {"remove": {"path": add["path"], "deletionTimestamp": 1, "dataChange": True}}
    with_dv = {"add": {**add, "deletionVector": dv}}
    pair = [with_dv, remove] if add_first else [remove, with_dv]
    append_commit(path, [{"commitInfo": {"operation": "DELETE"}}, *pair])
    version = log_version(path)
    with pytest.raises(ConfigurationError, match=f"deletion vectors \\({add['path']}\\)"):
        run(sink, 1, [users([2], "b1")])
    assert log_version(path) == version
    # a batch whose keys the file cannot hold does not read it
    assert run(sink, 1, [users([7], "b1")]).status == "committed"


def test_another_upsert_writer_on_the_same_key_between_plan_and_commit(path):
    """Two queries upsert key 2; the one that commits last wins, and no key is held twice."""
    run(upsert_sink(path), 0, [users([1, 2], "b0")], writer_id="a")
    other = upsert_sink(path)

    def foreign() -> None:
        from eosink.process import simulated_process

        with simulated_process("other"):  # another driver: its own view of the log
            assert run(other, 0, [users([2, 5], "other")], writer_id="b").status == "committed"

    handler, calls = race_at_rewritten(foreign)
    set_crash_handler(handler)
    try:
        assert run(upsert_sink(path), 1, [users([2, 3], "a1")], writer_id="a").status == "committed"
    finally:
        set_crash_handler(None)
    assert calls
    for reader in READERS.values():
        assert values(path, reader) == {1: "b0-1", 2: "a1-2", 3: "a1-3", 5: "other-5"}


def test_log_cleanup_past_the_planned_version_plans_again(path):
    """Another writer's commits, a checkpoint and log cleanup while the batch ran: the commits
    after the plan's version cannot all be read, so the upsert plans again (never commits a
    plan that may miss a file)."""
    from delta_history import age_log

    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2], "b0")])

    def maintain() -> None:
        for i in range(3):
            write_deltalake(path, pa.Table.from_batches([users([2], f"f{i}")]), mode="append")
        DeltaTable(path).create_checkpoint()
        age_log(path, 31)
        DeltaTable(path).cleanup_metadata()

    handler, calls = race_at_rewritten(maintain)
    set_crash_handler(handler)
    try:
        import structlog

        with structlog.testing.capture_logs() as events:
            assert run(sink, 1, [users([2], "b1")]).status == "committed"
    finally:
        set_crash_handler(None)
    assert [e for e in events if e["event"] == "delta.upsert_replanned"]
    for reader in READERS.values():
        assert values(path, reader) == {1: "b0-1", 2: "b1-2"}


def test_log_cleanup_before_the_first_plan_of_a_new_process_plans_on_the_checkpoint(path):
    """A new driver process (no file index kept) opens the view, and before the upsert reads
    the table's files another writer commits, checkpoints and cleans the log up past the view:
    the file index, read from that checkpoint, is ahead of the view, whose next commits are
    gone. The view is read anew from the checkpoint and the batch commits (nothing went
    wrong: it used to fail with "the log ... changed while its files were read")."""
    from delta_history import age_log
    from eosink_delta.snapshot import forget

    run(upsert_sink(path), 0, [users([1, 2], "b0")])
    forget(path)  # as a new driver process would

    def maintain(point: str) -> None:
        if point == "commit:checked" and not calls:
            calls.append(point)
            for i in (8, 9):
                batch = users([2, i], f"f{i}")
                write_deltalake(path, pa.Table.from_batches([batch]), mode="append")
            DeltaTable(path).create_checkpoint()
            age_log(path, 31)
            DeltaTable(path).cleanup_metadata()
            assert not os.path.exists(f"{path}/_delta_log/{1:020d}.json")

    calls: list[str] = []
    set_crash_handler(maintain)
    try:
        assert run(upsert_sink(path), 1, [users([2, 3], "b1")]).status == "committed"
    finally:
        set_crash_handler(None)
    assert calls
    for reader in READERS.values():
        assert values(path, reader) == {1: "b0-1", 2: "b1-2", 3: "b1-3", 8: "f8-8", 9: "f9-9"}


def test_a_column_added_between_plan_and_commit_is_kept_by_the_rewrite(path):
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2], "b0")])

    def add_column() -> None:
        extra = users([7], "f").append_column("extra", pa.array(["x"]))
        write_deltalake(path, pa.Table.from_batches([extra]), mode="append", schema_mode="merge")

    handler, calls = race_at_rewritten(add_column)
    set_crash_handler(handler)
    try:
        assert run(sink, 1, [users([1], "b1")]).status == "committed"
    finally:
        set_crash_handler(None)
    rows = by_key(read_delta_rs(path))
    assert {k: (r["v"], r["extra"]) for k, r in rows.items()} == {
        1: ("b1-1", None),
        2: ("b0-2", None),
        7: ("f-7", "x"),
    }


def test_a_commit_of_this_process_between_plan_and_commit_is_checked_too(path):
    """The same driver process commits another batch on the table (its log view is shared)
    while this batch's rewrite waits: the rewrite is planned again, not committed stale."""
    run(upsert_sink(path), 0, [users([1, 2], "b0")], writer_id="a")
    other = upsert_sink(path)

    def same_process() -> None:
        assert run(other, 0, [users([2, 5], "other")], writer_id="b").status == "committed"

    handler, calls = race_at_rewritten(same_process)
    set_crash_handler(handler)
    try:
        assert run(upsert_sink(path), 1, [users([2, 3], "a1")], writer_id="a").status == "committed"
    finally:
        set_crash_handler(None)
    assert calls
    for reader in READERS.values():
        assert values(path, reader) == {1: "b0-1", 2: "a1-2", 3: "a1-3", 5: "other-5"}


def test_another_attempt_of_the_same_batch_commits_first(path):
    """A zombie attempt of the batch (another driver) commits it while ours waits between
    rewrite and commit: ours is already committed, its rewritten files are deleted."""
    from eosink.process import simulated_process

    run(upsert_sink(path), 0, [users([1, 2], "b0")])

    def zombie() -> None:
        with simulated_process("zombie"):
            assert run(upsert_sink(path), 1, [users([2, 3], "b1")]).status == "committed"

    handler, calls = race_at_rewritten(zombie)
    set_crash_handler(handler)
    try:
        outcome = run(upsert_sink(path), 1, [users([2, 3], "b1")])
    finally:
        set_crash_handler(None)
    assert outcome.status == "skipped" and "concurrent commit" in outcome.reason
    assert txns(path) == [("w", 0), ("w", 1)]
    assert values(path) == {1: "b0-1", 2: "b1-2", 3: "b1-3"}
    live = {os.path.basename(u) for u in DeltaTable(path).file_uris()}
    upserts = {os.path.basename(p) for p in glob.glob(f"{path}/upsert-*.parquet")}
    assert upserts <= live  # the losing attempt's rewrite is gone


def test_a_file_of_many_row_groups_is_rewritten_batch_by_batch(path, monkeypatch):
    """The rewrite streams a touched file (a few record batches at a time): every other row of
    it survives, in order of its row groups, whatever the batch boundaries."""
    from eosink_delta import upsert

    monkeypatch.setattr(upsert, "BATCH_ROWS", 7)
    sink = upsert_sink(path, row_group_rows=10)
    run(sink, 0, [users(list(range(100)), "b0")])
    run(sink, 1, [users([0, 13, 14, 55, 99, 100], "b1")])
    expected = {i: f"b0-{i}" for i in range(101)}
    expected.update({i: f"b1-{i}" for i in (0, 13, 14, 55, 99, 100)})
    for reader in READERS.values():
        assert values(path, reader) == expected


def test_a_key_only_of_partition_columns_replaces_the_whole_partition_row(path):
    """Keyed by the partition column alone: the batch's row replaces the partition's row."""
    batch = pa.record_batch({"p": ["a", "b"], "n": pa.array([1, 2], pa.int64())})
    sink = upsert_sink(path, key=["p"], partition_by=["p"])
    run(sink, 0, [batch])
    run(sink, 1, [pa.record_batch({"p": ["b"], "n": pa.array([20], pa.int64())})])
    for reader in READERS.values():
        assert sorted((r["p"], r["n"]) for r in reader(path)) == [("a", 1), ("b", 20)]


def test_conflicts_every_time_fail_the_batch_with_nothing_committed(path, monkeypatch):
    """A writer that keeps appending the batch's keys: after the last plan the batch fails
    (the query restarts and writes it again), and nothing of it is in the table."""
    from eosink_delta import upsert

    monkeypatch.setattr(upsert, "MAX_PLANS", 2)
    sink = upsert_sink(path)
    run(sink, 0, [users([1, 2], "b0")])

    def foreign(point: str) -> None:
        if point == "commit:rewritten":
            write_deltalake(path, pa.Table.from_batches([users([2], "foreign")]), mode="append")

    set_crash_handler(foreign)
    try:
        with pytest.raises(Exception, match="conflicted with other writers' commits 2 times"):
            run(sink, 1, [users([2, 3], "b1")])
    finally:
        set_crash_handler(None)
    assert txns(path) == [("w", 0)]
    assert sorted(r["v"] for r in read_delta_rs(path)) == ["b0-1", "b0-2", "foreign-2", "foreign-2"]
    assert not glob.glob(f"{path}/upsert-*.parquet")  # the rewrites of both plans are gone
