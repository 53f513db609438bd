"""Keyed upserts (``mode="upsert"``, ``key``): the options and their errors, refusals that
leave nothing committed, key types and composite keys, rows moving between partitions, replays,
what a batch costs, and a concurrent writer's commit landing between the sink's plan and its
commit. Results are read by pyiceberg and by DuckDB's iceberg extension (where installed)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import (
    TABLE,
    catalog_properties,
    duckdb_missing,
    load,
    read_duckdb,
    read_pyiceberg,
    run,
)

from eosink.crash import set_crash_handler
from eosink.plugin import ConfigurationError


@pytest.fixture
def catalog(tmp_path):
    return catalog_properties(tmp_path)


def upsert_sink(catalog: dict[str, str], key=("id",), **options: Any) -> IcebergSink:
    return IcebergSink(
        table=TABLE,
        catalog=catalog,
        create_namespace=True,
        mode="upsert",
        key=list(key),
        **options,
    )


def kv(ids: list[int], value: str, **extra: Any) -> pa.RecordBatch:
    """Rows keyed by ``id`` (int64), each ``v`` = ``value`` + its id."""
    return pa.record_batch(
        {
            "id": pa.array(ids, pa.int64()),
            "v": pa.array([f"{value}{i}" for i in ids], pa.string()),
            **extra,
        }
    )


def held(catalog: dict[str, str], key=("id",)) -> dict[Any, dict[str, Any]]:
    """Every row by its key, read by pyiceberg; DuckDB (where it loads) must read the same
    rows, and no key may be held twice."""
    rows = read_pyiceberg(catalog)
    rows = [] if isinstance(rows, list) else rows.to_pylist()
    by_key = {tuple(r[k] for k in key): r for r in rows}
    assert len(by_key) == len(rows), "a key is held twice"
    if duckdb_missing() is None and rows:
        other = read_duckdb(catalog).to_pylist()
        assert sorted(map(_comparable, other)) == sorted(map(_comparable, rows))
    return by_key


def _comparable(row: dict[str, Any]) -> tuple:
    def plain(value: Any) -> Any:
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value

    return tuple(sorted((k, repr(plain(v))) for k, v in row.items()))


def values(catalog: dict[str, str]) -> dict[int, str]:
    return {k[0]: r["v"] for k, r in held(catalog).items()}


def data_files(tmp_path) -> set[str]:
    folder = tmp_path / "warehouse" / "lake" / "events" / "data"
    return {str(p) for p in folder.rglob("*.parquet")} if folder.exists() else set()


def live_files(catalog: dict[str, str]) -> set[str]:
    return {t.file.file_path.removeprefix("file://") for t in load(catalog).scan().plan_files()}


# -- options ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, message",
    [
        ({"mode": "upsert"}, "mode 'upsert' needs option key"),
        ({"key": ["id"]}, "option key is for mode 'upsert'"),
        ({"mode": "merge", "key": ["id"]}, "mode 'merge' is unknown"),
    ],
)
def test_option_errors_name_the_fix(catalog, options, message):
    with pytest.raises(ConfigurationError, match=message):
        IcebergSink(table=TABLE, catalog=catalog, **options)


def test_spark_string_options_give_the_key(catalog):
    sink = IcebergSink({"table": TABLE, "catalog.uri": "sqlite://", "mode": "upsert", "key": "a,b"})
    assert sink.upsert_key() == ("a", "b")
    assert IcebergSink(table=TABLE, catalog=catalog).upsert_key() is None


@pytest.mark.parametrize(
    "batch, message",
    [
        (kv([1], "a"), r"key column\(s\) \['user'\] are not in the stream's columns"),
        (pa.record_batch({"user": pa.array([1.5])}), "'user' .* is double"),
        (
            pa.record_batch({"user": pa.array([{"a": 1}], pa.struct([("a", pa.int64())]))}),
            "'user' .* is struct",
        ),
    ],
    ids=["missing", "float", "struct"],
)
def test_a_key_the_stream_cannot_match_is_refused_at_init(catalog, batch, message):
    sink = upsert_sink(catalog, key=["user"])
    with pytest.raises(ConfigurationError, match=message):
        run(sink, 0, [batch])
    assert read_pyiceberg(catalog) == []  # not even the table was created


def test_complete_mode_is_refused_at_init(catalog, tmp_path):
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv([1, 2], "a")]).status == "committed"
    with pytest.raises(ConfigurationError, match="complete output mode"):
        run(sink, 1, [kv([1], "b")], mode="complete")
    assert values(catalog) == {1: "a1", 2: "a2"}
    assert data_files(tmp_path) == live_files(catalog)


# -- refusals at commit ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "parts, message",
    [
        ([pa.record_batch({"id": pa.array([3, None], pa.int64()), "v": ["x", "y"]})], "null"),
        ([kv([3, 4], "b"), kv([4], "c")], r"more than one row of the batch, e.g. \{'id': 4\}"),
    ],
    ids=["null-key", "doubled-key"],
)
def test_a_null_or_doubled_key_is_refused_with_nothing_committed(catalog, tmp_path, parts, message):
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv([1, 2, 3], "a")]).status == "committed"
    snapshots = len(load(catalog).metadata.snapshots)
    with pytest.raises(ConfigurationError, match=message):
        run(sink, 1, parts)
    assert values(catalog) == {1: "a1", 2: "a2", 3: "a3"}
    assert len(load(catalog).metadata.snapshots) == snapshots
    assert data_files(tmp_path) == live_files(catalog)  # the staged files were aborted
    assert sink.is_committed(_ctx(1)) is None


def _ctx(batch: int):
    from eosink.plugin import BatchContext

    return BatchContext(sink="iceberg", writer_id="w", batch_id=batch, query_id="q")


# -- semantics ---------------------------------------------------------------------------------
def test_a_batch_replaces_its_keys_rows_and_a_replay_is_skipped(catalog):
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv([0, 1, 2, 3, 4], "a")]).status == "committed"
    assert run(sink, 1, [kv([3, 4, 5], "b"), kv([6, 7], "b")]).status == "committed"
    want = {0: "a0", 1: "a1", 2: "a2", 3: "b3", 4: "b4", 5: "b5", 6: "b6", 7: "b7"}
    assert values(catalog) == want
    # Spark replays the last batches after a restart, with other values (a non-deterministic
    # source): the proof says they are in, and nothing changes
    for batch in (0, 1):
        assert run(upsert_sink(catalog), batch, [kv([1, 3], "z")]).status == "skipped"
    assert values(catalog) == want
    assert run(sink, 2, [kv([0, 7], "c")]).status == "committed"
    assert values(catalog) == {**want, 0: "c0", 7: "c7"}


def test_an_empty_batch_records_its_proof_and_changes_no_row(catalog):
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv([1], "a")]).status == "committed"
    assert run(sink, 1, [kv([], "b")]).status == "committed"
    assert values(catalog) == {1: "a1"}
    assert run(sink, 1, [kv([1], "b")]).status == "skipped"


def test_composite_keys(catalog):
    sink = upsert_sink(catalog, key=("tenant", "id"))

    def batch(pairs, value):
        return pa.record_batch(
            {
                "tenant": pa.array([t for t, _ in pairs]),
                "id": pa.array([i for _, i in pairs], pa.int64()),
                "v": pa.array([f"{value}{t}{i}" for t, i in pairs]),
            }
        )

    first = [(t, i) for t in ("a", "b") for i in range(3)]
    assert run(sink, 0, [batch(first, "x")]).status == "committed"
    # ("a", 1) and ("b", 2) replaced; ("b", 1) and ("a", 2), which share one column each with
    # them, kept; ("c", 1) added
    assert run(sink, 1, [batch([("a", 1), ("b", 2), ("c", 1)], "y")]).status == "committed"
    got = {k: r["v"] for k, r in held(catalog, key=("tenant", "id")).items()}
    want = {k: f"x{k[0]}{k[1]}" for k in first}
    want.update({("a", 1): "ya1", ("b", 2): "yb2", ("c", 1): "yc1"})
    assert got == want


def test_many_composite_keys_in_one_batch(catalog):
    """A batch of thousands of composite keys: the delete filter must not be one deep
    expression tree (pyiceberg's visitors recurse through it)."""
    sink = upsert_sink(catalog, key=("tenant", "id"))
    n = 3000

    def batch(value):
        return pa.record_batch(
            {
                "tenant": pa.array([f"t{i % 7}" for i in range(n)]),
                "id": pa.array(list(range(n)), pa.int64()),
                "v": pa.array([f"{value}{i}" for i in range(n)]),
            }
        )

    assert run(sink, 0, [batch("a")]).status == "committed"
    assert run(sink, 1, [batch("b")]).status == "committed"
    rows = read_pyiceberg(catalog)
    assert rows.num_rows == n
    assert set(rows.column("v").to_pylist()) == {f"b{i}" for i in range(n)}


KEY_TYPES = {
    "string": pa.array(["k0", "k1", "k2", "k3"]),
    "date": pa.array([dt.date(2024, 1, d) for d in (1, 2, 3, 31)]),
    "timestamp": pa.array(
        [dt.datetime(2024, 1, 1, 12, 0, 0, us) for us in (0, 1, 2, 999_999)], pa.timestamp("us")
    ),
    "timestamptz": pa.array(
        [dt.datetime(2024, 1, 1, 12, 0, 0, us, dt.timezone.utc) for us in (0, 1, 2, 999_999)],
        pa.timestamp("us", "UTC"),
    ),
    "decimal": pa.array(
        [decimal.Decimal(s) for s in ("0.10", "1.25", "-3.50", "12345.67")], pa.decimal128(9, 2)
    ),
    "int32": pa.array([1, 2, -3, 2**31 - 1], pa.int32()),
    "boolean-and-int": None,  # composite: a bool column beside an int
}


@pytest.mark.parametrize("kind", sorted(KEY_TYPES))
def test_keys_of_every_matchable_type(catalog, kind):
    """Batch 1 replaces two of batch 0's four keys: the file holding them is rewritten, the
    other two rows kept (the filter's literals in Iceberg's units, and pyarrow's rewrite
    comparing them to the column)."""
    if KEY_TYPES[kind] is None:
        keys = {"flag": pa.array([True, False, True, False]), "n": pa.array([1, 1, 2, 2])}
    else:
        keys = {"k": KEY_TYPES[kind]}
    key = tuple(keys)
    sink = upsert_sink(catalog, key=key)

    def batch(indices, value):
        cols = {name: col.take(pa.array(indices)) for name, col in keys.items()}
        return pa.record_batch({**cols, "v": pa.array([f"{value}{i}" for i in indices])})

    assert run(sink, 0, [batch([0, 1, 2, 3], "a")]).status == "committed"
    assert run(sink, 1, [batch([1, 3], "b")]).status == "committed"
    got = sorted(r["v"] for r in held(catalog, key=key).values())
    assert got == ["a0", "a2", "b1", "b3"]
    assert run(sink, 2, [batch([0], "c")]).status == "committed"
    got = sorted(r["v"] for r in held(catalog, key=key).values())
    assert got == ["a2", "b1", "b3", "c0"]


def test_a_keys_row_moves_to_another_partition(catalog):
    sink = upsert_sink(catalog, partition_by=["region"])
    first = kv([1, 2, 3, 4], "a", region=pa.array(["eu", "eu", "us", "us"]))
    assert run(sink, 0, [first]).status == "committed"
    moved = kv([2, 3], "b", region=pa.array(["us", "ap"]))
    assert run(sink, 1, [moved]).status == "committed"
    got = {k[0]: (r["v"], r["region"]) for k, r in held(catalog).items()}
    assert got == {1: ("a1", "eu"), 2: ("b2", "us"), 3: ("b3", "ap"), 4: ("a4", "us")}
    # a reader pruning by partition finds each row where it now is
    from pyiceberg.expressions import EqualTo

    by_region = load(catalog).scan(row_filter=EqualTo("region", "eu")).to_arrow()
    assert sorted(by_region.column("id").to_pylist()) == [1]


@pytest.mark.parametrize("transform", ["bucket(4, region)", "truncate(1, region)"])
def test_a_file_partly_replaced_under_a_transform_is_rewritten(catalog, transform):
    """The rows a batch does not replace are written again in their partition under the
    transform (when pyiceberg's writer wrote them, it needed pyiceberg-core for it: without,
    the commit failed with ``NotInstalledError``, found by the kit's keyed histories on a
    ``bucket`` spec)."""
    sink = upsert_sink(catalog, partition_by=[transform])
    first = kv([1, 2, 3, 4], "a", region=pa.array(["eu", "eu", "eu", "us"]))
    assert run(sink, 0, [first]).status == "committed"
    assert run(sink, 1, [kv([2], "b", region=pa.array(["eu"]))]).status == "committed"
    got = {k[0]: r["v"] for k, r in held(catalog).items()}
    assert got == {1: "a1", 2: "b2", 3: "a3", 4: "a4"}


# -- cost --------------------------------------------------------------------------------------
def _commit_summaries(catalog: dict[str, str], before: int) -> list[dict[str, str]]:
    """The summaries of the snapshots after snapshot ``before`` (one commit's, in order)."""
    table = load(catalog)
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
    seqs = [s.snapshot_id for s in snapshots]
    after = snapshots[seqs.index(before) + 1 :]
    return [s.summary.additional_properties | {"op": s.summary.operation.value} for s in after]


def _total(summaries: list[dict[str, str]], name: str) -> int:
    return sum(int(s.get(name, "0")) for s in summaries)


def test_a_batch_touching_one_key_rewrites_only_the_files_that_may_hold_it(catalog):
    sink = upsert_sink(catalog)
    for batch in range(30):  # 30 files, each of its own ten keys
        assert run(sink, batch, [kv(list(range(batch * 10, batch * 10 + 10)), "a")]).status == (
            "committed"
        )
    assert len(live_files(catalog)) == 30
    head = load(catalog).metadata.current_snapshot_id
    assert run(sink, 30, [kv([125], "b")]).status == "committed"  # a key of file 12
    summaries = _commit_summaries(catalog, head)
    assert _total(summaries, "deleted-data-files") == 1, summaries
    assert _total(summaries, "added-data-files") == 2, summaries  # the rewrite and the batch
    assert _total(summaries, "deleted-records") == 10, summaries
    assert len(live_files(catalog)) == 31
    got = values(catalog)
    assert len(got) == 300 and got[125] == "b125" and got[124] == "a124"

    # a batch whose keys fill a whole file drops it without a rewrite
    head = load(catalog).metadata.current_snapshot_id
    assert run(sink, 31, [kv(list(range(70, 80)), "c")]).status == "committed"
    summaries = _commit_summaries(catalog, head)
    assert _total(summaries, "deleted-data-files") == 1, summaries
    assert _total(summaries, "added-data-files") == 1, summaries
    assert len(values(catalog)) == 300


def test_each_rewritten_file_keeps_its_rows_in_a_file_of_its_own(catalog):
    """The rows a batch keeps of two files it touches are not gathered into one file: that
    file would span the table's oldest keys and the recent ones, and every later batch
    updating a recent key would rewrite it whole (a batch's cost growing with the table)."""
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv(list(range(0, 100)), "a")]).status == "committed"
    assert run(sink, 1, [kv(list(range(100, 200)), "a")]).status == "committed"
    assert run(sink, 2, [kv([50, 150], "b")]).status == "committed"  # both files rewritten
    head = load(catalog).metadata.current_snapshot_id
    assert run(sink, 3, [kv([160], "c")]).status == "committed"  # a recent key only
    summaries = _commit_summaries(catalog, head)
    assert _total(summaries, "deleted-data-files") == 1, summaries
    # the file of keys 100..199 less 150: the oldest keys' rows are not rewritten again
    assert _total(summaries, "deleted-records") == 99, summaries
    got = values(catalog)
    assert len(got) == 200
    assert (got[50], got[150], got[160], got[0], got[199]) == ("b50", "b150", "c160", "a0", "a199")


def test_upserts_merge_manifests_when_the_table_asks(catalog):
    """An upsert's overwrite snapshot merges manifests as an append does when the table sets
    ``commit.manifest-merge.enabled`` (as Iceberg's own overwrites do): without it every batch
    leaves a manifest more, and every later batch reads them all to plan."""
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv(list(range(10)), "a")]).status == "committed"
    with load(catalog).transaction() as txn:
        txn.set_properties(
            {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "3"}
        )
    for batch in range(1, 12):  # each batch a new key and the batch before's new key
        keys = [(batch - 1) * 10, batch * 10]
        assert run(sink, batch, [kv(keys, "b")]).status == "committed"
    table = load(catalog)
    assert {s.summary.operation.value for s in table.metadata.snapshots[1:]} == {"overwrite"}
    manifests = table.metadata.current_snapshot().manifests(table.io)
    assert len(manifests) < 4, len(manifests)
    got = values(catalog)
    assert len(got) == 10 + 11 and got[110] == "b110" and got[0] == "b0" and got[1] == "a1"


def test_a_batch_decodes_only_the_manifests_new_to_it(catalog, monkeypatch):
    """A manifest file never changes once written: a batch's commit decodes the manifests
    earlier batches did not (pyiceberg decoded each live manifest three times a commit, ~2 ms
    each however few its entries: a batch's cost grew with the table's manifests)."""
    from pyiceberg.manifest import ManifestFile

    sink = upsert_sink(catalog)
    for batch in range(12):  # a manifest a batch (merging off): 12 and more
        keys = [batch * 10 + i for i in range(5)] + ([batch * 10 - 10] if batch else [])
        assert run(sink, batch, [kv(keys, "a")]).status == "committed"
    table = load(catalog)
    manifests = table.metadata.current_snapshot().manifests(table.io)
    assert len(manifests) >= 12
    head = table.metadata.current_snapshot_id
    newest = {m.manifest_path for m in manifests if m.added_snapshot_id == head}
    decoded: list[str] = []
    real = ManifestFile.fetch_manifest_entry

    def counting(self, io, discard_deleted=True):
        decoded.append(self.manifest_path)
        return real(self, io, discard_deleted)

    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", counting)
    assert run(sink, 12, [kv([110, 120], "b")]).status == "committed"
    monkeypatch.setattr(ManifestFile, "fetch_manifest_entry", real)
    # the manifests batch 11's commit wrote, once each
    assert len(decoded) == len(set(decoded)) and set(decoded) <= newest, (decoded, newest)
    got = values(catalog)
    assert got[110] == "b110" and got[120] == "b120" and got[111] == "a111" and len(got) == 61


def test_a_batch_of_many_keys_reads_only_the_files_that_may_hold_them(catalog, monkeypatch):
    """pyiceberg stops pruning by column bounds for an ``In`` of more than 200 values: a batch
    of 300 keys would read every file of the table to rewrite the one holding them (O(table)
    per batch). The filter must keep pruning: only the files whose bounds hold a key are read.
    """
    from pyiceberg.io.pyarrow import ArrowScan

    sink = upsert_sink(catalog)
    for batch in range(30):  # 30 files of 100 keys each: file b holds keys b*1000..b*1000+99
        keys = list(range(batch * 1000, batch * 1000 + 100))
        assert run(sink, batch, [kv(keys, "a")]).status == "committed"
    read = []
    real = ArrowScan.to_table

    def counting(self, tasks):
        tasks = list(tasks)
        read.extend(t.file.file_path for t in tasks)
        return real(self, tasks)

    monkeypatch.setattr(ArrowScan, "to_table", counting)
    keys = [*range(3000, 3050), *range(17_000, 17_100)]
    keys += list(range(40_000, 40_150))  # new keys, beyond every file
    head = load(catalog).metadata.current_snapshot_id
    assert run(sink, 30, [kv(keys, "b")]).status == "committed"
    monkeypatch.setattr(ArrowScan, "to_table", real)
    assert len(keys) == 300
    # file 3 (rewritten) and file 17 (read to find every row matches: dropped whole)
    assert len(set(read)) == 2, sorted(read)
    summaries = _commit_summaries(catalog, head)
    assert _total(summaries, "deleted-data-files") == 2, summaries
    assert _total(summaries, "added-data-files") == 2, summaries  # file 3's rest, the batch
    got = values(catalog)
    assert len(got) == 3000 + 150
    assert got[3049] == "b3049" and got[3050] == "a3050" and got[17_050] == "b17050"


# -- a concurrent writer ---------------------------------------------------------------------
def _foreign_at_commit(action, monkeypatch) -> list[bool]:
    """Run ``action`` once, when the sink has planned its commit and not yet sent it; returns
    the outcomes of the sink's commits (``False``: the catalog refused it), filled as they go."""
    done = []

    def handler(name: str) -> None:
        if name == "commit:checked" and not done:
            done.append(name)
            action()

    set_crash_handler(handler)
    outcomes: list[bool] = []
    real = IcebergSink._commit_on

    def recorded(self, *args, **kwargs):
        outcomes.append(real(self, *args, **kwargs))
        return outcomes[-1]

    monkeypatch.setattr(IcebergSink, "_commit_on", recorded)
    return outcomes


@pytest.fixture
def no_crash_handler():
    yield
    set_crash_handler(None)


def test_a_foreign_append_of_a_batch_key_between_plan_and_commit_is_replaced(
    catalog, no_crash_handler, monkeypatch
):
    """Another writer appends a row of key 3 after the sink planned its delete (on a head
    without it): the sink's commit must lose the race and be planned again, so the foreign row
    is replaced by the batch's, as MERGE would; committing the old plan would leave key 3
    twice."""
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv([1, 2, 3], "a")]).status == "committed"

    def foreign_append():
        table = load(catalog)
        table.append(pa.Table.from_batches([kv([3, 9], "f")]).cast(table.schema().as_arrow()))

    outcomes = _foreign_at_commit(foreign_append, monkeypatch)
    assert run(sink, 1, [kv([3, 4], "b")]).status == "committed"
    assert outcomes == [False, True]  # refused, planned again on the new head, committed
    assert values(catalog) == {1: "a1", 2: "a2", 3: "b3", 4: "b4", 9: "f9"}


def test_a_foreign_delete_between_plan_and_commit_is_not_undone(
    catalog, no_crash_handler, monkeypatch
):
    """Another writer deletes key 1 (whose file the sink's plan rewrites to drop key 2) after
    the plan: committing the old plan would bring key 1 back in the rewritten file."""
    from pyiceberg.expressions import EqualTo

    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv([1, 2, 3], "a")]).status == "committed"
    outcomes = _foreign_at_commit(lambda: load(catalog).delete(EqualTo("id", 1)), monkeypatch)
    assert run(sink, 1, [kv([2], "b")]).status == "committed"
    assert outcomes == [False, True]  # refused, planned again on the new head, committed
    assert values(catalog) == {2: "b2", 3: "a3"}


def test_files_rewritten_for_a_commit_that_lost_the_race_are_not_left_behind(
    catalog, tmp_path, no_crash_handler, monkeypatch
):
    """The plan that lost the race rewrote a file (to drop key 2 of [1, 2, 3]): no snapshot
    lists that rewrite; it must not stay in the table's folder."""
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv([1, 2, 3], "a")]).status == "committed"

    def foreign_append():
        table = load(catalog)
        table.append(pa.Table.from_batches([kv([9], "f")]).cast(table.schema().as_arrow()))

    outcomes = _foreign_at_commit(foreign_append, monkeypatch)
    assert run(sink, 1, [kv([2], "b")]).status == "committed"
    assert outcomes == [False, True]  # refused, planned again on the new head, committed
    assert values(catalog) == {1: "a1", 2: "b2", 3: "a3", 9: "f9"}
    # files of snapshots still in the metadata are kept (the table's history); others are not
    table = load(catalog)
    referenced = set()
    for snapshot in table.metadata.snapshots:
        for manifest in snapshot.manifests(table.io):
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
                referenced.add(entry.data_file.file_path.removeprefix("file://"))
    assert data_files(tmp_path) == referenced


def test_each_batch_commits_one_snapshot(catalog):
    """An upsert that drops and rewrites files, like a complete batch, commits one snapshot,
    carrying the proof (pyiceberg's delete would add a delete and an overwrite snapshot before
    the append: a history growing three times as fast as the batches)."""
    sink = upsert_sink(catalog)
    assert run(sink, 0, [kv([1, 2, 3], "a")]).status == "committed"
    assert run(sink, 1, [kv([2], "b")]).status == "committed"  # a rewrite of batch 0's file
    assert run(sink, 2, [kv([3, 4], "c")]).status == "committed"
    snapshots = load(catalog).metadata.snapshots
    assert [s.summary.operation.value for s in snapshots] == ["append", "overwrite", "overwrite"]
    assert [s.summary["eosink.batch"] for s in snapshots] == ["0", "1", "2"]
    assert values(catalog) == {1: "a1", 2: "b2", 3: "c3", 4: "c4"}


def test_keep_snapshots_counts_batches(catalog):
    """With ``keep_snapshots=1`` each commit expires the batch before it, and the table, its
    proof and replays stay right."""
    sink = upsert_sink(catalog, keep_snapshots=1)
    assert run(sink, 0, [kv([1, 2, 3], "a")]).status == "committed"
    assert run(sink, 1, [kv([2], "b")]).status == "committed"  # a delete and a rewrite
    assert run(sink, 2, [kv([3, 4], "c")]).status == "committed"
    assert values(catalog) == {1: "a1", 2: "b2", 3: "c3", 4: "c4"}
    assert len(load(catalog).metadata.snapshots) == 1
    assert run(upsert_sink(catalog), 2, [kv([3], "z")]).status == "skipped"
    assert values(catalog) == {1: "a1", 2: "b2", 3: "c3", 4: "c4"}


# -- the bounds check before pyiceberg's ------------------------------------------------------
def _data_file(lower: Any, upper: Any, kind: Any = None, content: Any = None) -> Any:
    from pyiceberg.conversions import to_bytes
    from pyiceberg.manifest import DataFile, DataFileContent
    from pyiceberg.types import LongType

    kind = kind or LongType()
    return DataFile.from_args(
        content=content or DataFileContent.DATA,
        lower_bounds={} if lower is None else {1: to_bytes(kind, lower)},
        upper_bounds={} if upper is None else {1: to_bytes(kind, upper)},
    )


def test_a_files_bounds_are_checked_by_the_batchs_sorted_keys():
    from eosink_iceberg.upsert import batch_match
    from pyiceberg.manifest import DataFileContent
    from pyiceberg.schema import Schema
    from pyiceberg.types import BinaryType, IntegerType, LongType, NestedField, StringType

    schema = Schema(NestedField(1, "id", LongType(), required=False))
    may_hold = batch_match(pa.table({"id": [30, 10, 20]}), ("id",)).may_hold(schema)
    assert may_hold(_data_file(10, 10)) and may_hold(_data_file(0, 10))  # a bound is a key
    assert may_hold(_data_file(30, 99)) and may_hold(_data_file(11, 25))
    assert not may_hold(_data_file(11, 19)) and not may_hold(_data_file(31, 99))
    assert not may_hold(_data_file(0, 9))
    assert may_hold(_data_file(None, None))  # no bounds: any value
    # a file written before the column was promoted from int to long: 4-byte bounds
    assert may_hold(_data_file(15, 25, IntegerType()))
    assert not may_hold(_data_file(0, 1, IntegerType()))
    assert may_hold(_data_file(b"\x01", b"\x02", BinaryType()))  # bounds that do not decode
    assert may_hold(_data_file(0, 1, content=DataFileContent.POSITION_DELETES))

    strings = Schema(NestedField(1, "id", StringType(), required=False))
    may_hold = batch_match(pa.table({"id": ["b", "d"]}), ("id",)).may_hold(strings)
    assert may_hold(_data_file("a", "c", StringType()))
    assert not may_hold(_data_file("bb", "c", StringType()))
