"""A table with a long history: 10k files in 1k commits, the kept snapshot, checkpoints, cleanup.

A stream writes for months: the sink keeps one snapshot per table between batches instead of
opening the table (all its files) three times a batch, and must stay correct on it: the txn
check sees other processes' commits, a concurrent attempt of the same batch loses cleanly,
and log cleanup never loses the txn a replay is skipped by.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from deltalake import DeltaTable
from delta_helpers import commit_elsewhere, rows, run, txns
from delta_history import age_log, commit_file, copy_table, synthesize
from eosink_delta import snapshot
from eosink_delta.sink import DeltaSink

from eosink.crash import set_crash_handler

COMMITS, FILES_PER_COMMIT = 1000, 10


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """The long table, built once; each test works on its own copy."""
    path = str(tmp_path_factory.mktemp("history") / "table")
    synthesize(path, commits=COMMITS, files_per_commit=FILES_PER_COMMIT)
    return path


@pytest.fixture
def path(history, tmp_path):
    copy = str(tmp_path / "table")
    copy_table(history, copy)
    return copy


def new_ids(path: str) -> Counter:
    ids = DeltaTable(path).to_pyarrow_table().column("id").to_pylist()
    return Counter(i for i in ids if i != 0)  # the synthesized history's rows all have id 0


def test_the_history_is_as_long_as_claimed(history):
    table = DeltaTable(history)
    assert table.version() == COMMITS
    assert len(table.file_uris()) == COMMITS * FILES_PER_COMMIT
    assert table.transaction_version("w") == COMMITS - 1


def test_batches_open_the_table_once_and_commit_exactly_once(path, monkeypatch):
    opened = []
    real_open = snapshot.open_table
    monkeypatch.setattr(snapshot, "open_table", lambda uri: opened.append(uri) or real_open(uri))
    sink = DeltaSink(path=path)
    statuses = [run(sink, b).status for b in (COMMITS, COMMITS + 1, COMMITS + 2, COMMITS + 1)]
    assert statuses == ["committed", "committed", "committed", "skipped"]
    assert len(opened) == 1  # then brought up to date, never opened again
    assert new_ids(path) == Counter(
        i for b in (COMMITS, COMMITS + 1, COMMITS + 2) for i in rows(b).column("id").to_pylist()
    )
    assert DeltaTable(path).transaction_version("w") == COMMITS + 2


def test_the_txn_check_sees_other_processes_commits(path):
    sink = DeltaSink(path=path)
    assert run(sink, COMMITS).status == "committed"  # the sink now keeps a snapshot
    commit_elsewhere(path, COMMITS + 1)  # another attempt of the next batch won meanwhile
    assert run(sink, COMMITS + 1).status == "skipped"
    assert run(sink, COMMITS + 2).status == "committed"
    assert max(new_ids(path).values()) == 1  # no duplicates


def test_a_concurrent_attempt_of_the_same_batch_wins_and_ours_loses_cleanly(path):
    sink = DeltaSink(path=path)
    assert run(sink, COMMITS).status == "committed"

    def race(point: str) -> None:
        if point == "commit:checked":  # after our txn check, before our commit
            commit_elsewhere(path, COMMITS + 1)

    set_crash_handler(race)
    try:
        outcome = run(sink, COMMITS + 1)
    finally:
        set_crash_handler(None)
    assert outcome.status == "skipped" and "concurrent commit" in outcome.reason
    assert [t for t in txns(path) if t[1] >= COMMITS] == [("w", COMMITS), ("w", COMMITS + 1)]
    assert max(new_ids(path).values()) == 1
    assert run(sink, COMMITS + 2).status == "committed"


def test_checkpoints_at_the_tables_interval_and_expired_log_cleanup_keeps_the_txn(tmp_path):
    """From eosink's commit path: a checkpoint every 10 commits, expired commits cleaned then.

    Cleanup runs only with a checkpoint, not after every commit (where delta-rs would list the
    whole log each time), and the checkpoint carries the txn on: the writer's last batch is
    still skipped after the commit JSONs that held its txn are gone.
    """
    path = str(tmp_path / "table")
    logs = os.path.join(path, "_delta_log")
    sink = DeltaSink(path=path)
    run(sink, 0)  # version 1
    DeltaTable(path).alter.set_table_properties({"delta.checkpointInterval": "10"})  # 2
    run(sink, 1)  # version 3: writer "w" stops here
    DeltaTable(path).create_checkpoint()  # at 3, so versions 0..2 could be cleaned up
    age_log(path, 31)  # older than delta.logRetentionDuration's default (30 days)
    for batch in range(5):  # versions 4..8: no checkpoint due, so no cleanup either
        run(sink, batch, writer_id="other")
    assert os.path.exists(commit_file(path, 1))
    assert not os.path.exists(os.path.join(logs, f"{8:020d}.checkpoint.parquet"))
    age_log(path, 31)
    run(sink, 5, writer_id="other")  # version 9: (9 + 1) % 10 == 0, a checkpoint is due
    assert os.path.exists(os.path.join(logs, f"{9:020d}.checkpoint.parquet"))
    assert sorted(os.listdir(logs))[:2] == [f"{9:020d}.checkpoint.parquet", f"{9:020d}.json"]
    assert [t for t in txns(path) if t[0] == "w"] == []  # the commits with its txn are gone
    assert run(sink, 1).status == "skipped"  # its txn lives on in the checkpoint
    snapshot.forget(path)
    assert run(DeltaSink(path=path), 1).status == "skipped"  # also on a newly opened table
    assert run(sink, 2).status == "committed"
    assert DeltaTable(path).to_pyarrow_table().num_rows == 5 * 9
