"""A long history: the per-batch work stays bounded and the decisions stay right.

The sink keeps a view of the log between batches (:mod:`eosink_files.log_view`): it must still
see what other processes commit, lose a race cleanly, list the log once per process, and
delete obsolete log files a few at a time.
"""

from __future__ import annotations

import os
import time

import pytest
from eosink_files import committed_files
from eosink_files.log import LOG_DIR
from eosink_files.log_view import EXPIRE_PER_COMMIT, forget_views
from eosink_files.sink import FilesSink
from eosink_files.store import LocalStore
from files_helpers import commit_elsewhere, record_listings, run, synthesize_history

from eosink.plugin import BatchContext
from eosink.registry import plugin_manager

HISTORY = 1_200  # commits
FILES_PER_BATCH = 10  # 12,000 files in the table


@pytest.fixture
def table(tmp_path):
    out = str(tmp_path / "out")
    synthesize_history(out, HISTORY, files_per_batch=FILES_PER_BATCH)
    return out


def committed_batch(out, batch_id, writer="w"):
    ctx = BatchContext("files", writer, batch_id, query_id="q1")
    return plugin_manager(FilesSink(path=out)).hook.is_committed(ctx=ctx)


def unique_entries(out) -> int:
    uris = [f.uri for f in committed_files(out)]
    assert len(uris) == len(set(uris)), "a file is listed twice"
    return len(uris)


def test_long_history_sees_other_processes(table):
    assert committed_batch(table, HISTORY - 1).batch_id == HISTORY - 1
    assert run(FilesSink(path=table), HISTORY - 1).status == "skipped"
    assert run(FilesSink(path=table), HISTORY).status == "committed"
    assert unique_entries(table) == HISTORY * FILES_PER_BATCH + 2
    # a zombie of this writer commits the next batch, another writer its first one
    assert commit_elsewhere(table, "w", HISTORY + 1) == "committed"
    assert commit_elsewhere(table, "b", 0) == "committed"
    assert committed_batch(table, HISTORY + 1).batch_id == HISTORY + 1  # a fresh read
    assert run(FilesSink(path=table), HISTORY + 1).status == "skipped"
    assert run(FilesSink(path=table), HISTORY + 2).status == "committed"
    assert unique_entries(table) == HISTORY * FILES_PER_BATCH + 8


def test_concurrent_commit_of_the_same_batch_loses_cleanly(table, monkeypatch):
    assert run(FilesSink(path=table), HISTORY).status == "committed"
    publish, raced = LocalStore.publish, []

    def racing(self, relpath, data, crash=None, overwrite=False):
        if relpath.startswith(f"{LOG_DIR}/") and not raced:
            raced.append(relpath)  # the zombie publishes this very batch first
            assert commit_elsewhere(table, "w", HISTORY + 1) == "committed"
        return publish(self, relpath, data, crash, overwrite)

    monkeypatch.setattr(LocalStore, "publish", racing)
    assert run(FilesSink(path=table), HISTORY + 1).status == "skipped"
    assert raced == [f"{LOG_DIR}/{HISTORY + 1}"]
    assert unique_entries(table) == HISTORY * FILES_PER_BATCH + 4
    on_disk = [n for n in os.listdir(table) if n.startswith("part-")]
    assert len(on_disk) == 4  # the loser's files were removed by its abort


def test_the_log_is_listed_once_per_process(tmp_path, monkeypatch):
    out = str(tmp_path / "out")
    listed = record_listings(monkeypatch)
    for b in range(30):
        run(FilesSink(path=out), b)
    assert listed.count(LOG_DIR) == 1
    forget_views()  # a new process lists it again, once
    for b in range(30, 40):
        run(FilesSink(path=out), b)
    assert listed.count(LOG_DIR) == 2


def test_expiry_deletes_a_few_log_files_per_commit(tmp_path):
    out = str(tmp_path / "out")
    # 1,000 batches 1 s apart, all log files kept: the oldest ~400 are past a 600 s delay
    synthesize_history(out, 1_000, trigger_s=1.0, delay_s=10_000)
    log_dir = os.path.join(out, LOG_DIR)
    before = len(os.listdir(log_dir))
    assert before == 1_000
    run(FilesSink(path=out), 1_000)
    assert before + 1 - len(os.listdir(log_dir)) == EXPIRE_PER_COMMIT
    for b in range(1_001, 1_150):
        run(FilesSink(path=out), b)
    oldest = min(os.listdir(log_dir), key=lambda n: int(n.split(".")[0]))
    assert 390 <= int(oldest.split(".")[0]) <= 420  # the files past the delay are gone
    assert os.path.getmtime(os.path.join(log_dir, oldest)) > time.time() - 605  # the rest kept
    assert committed_batch(out, 1_149).batch_id == 1_149
