"""The commit lists only files the driver can read, with the sizes the writers reported.

Files can vanish between ``write`` and ``commit`` (a ``cleanup`` run with an age below the
batch's duration) or never be visible to the driver at all (``memory://`` or a local folder
of an executor's machine): a proof over such files would make Spark's reader fail, or lose
the batch. The commit refuses, nothing is published, and the replay writes the batch again.
"""

from __future__ import annotations

import os

import pytest
from eosink_files import cleanup, committed_files, read_table
from eosink_files.manifest_commit import UnreadableFilesError
from eosink_files.sink import FilesSink
from files_helpers import rows, run

from eosink.plugin import BatchContext, ConfigurationError, hookimpl
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner


class BeforeCommit:
    """Runs ``action(messages)`` on the driver just before the sink's commit."""

    def __init__(self, action):
        self.action = action

    @hookimpl(wrapper=True)
    def commit(self, messages):
        self.action(messages)
        return (yield)


def run_with(sink, action, batch_id=0):
    parts = [[rows(batch_id, p)] for p in range(2)]
    ctx = BatchContext("files", "w", batch_id, query_id="q1")
    return run_batch(sink, ctx, parts[0][0].schema, LocalRunner(parts), plugins=[action])


def test_commit_refuses_files_a_cleanup_deleted(tmp_path):
    out = str(tmp_path / "out")
    early_cleanup = BeforeCommit(lambda _: cleanup(out, older_than_s=0, dry_run=False))
    with pytest.raises(UnreadableFilesError, match=r"part-0000\d-.*missing.*cleanup --older-than"):
        run_with(FilesSink(path=out), early_cleanup)
    assert committed_files(out) == []  # no proof over missing files
    assert run(FilesSink(path=out), 0).status == "committed"  # the replay writes it again
    assert read_table(out).num_rows == 8


def test_commit_refuses_a_file_of_another_size(tmp_path):
    out = tmp_path / "out"

    def truncate(messages):
        f = messages[0].files[0]
        with open(out / f.relpath, "r+b") as handle:
            handle.truncate(f.size - 1)

    with pytest.raises(UnreadableFilesError, match=r"has \d+ bytes, the writer reported \d+"):
        run_with(FilesSink(path=str(out)), BeforeCommit(truncate))
    assert committed_files(str(out)) == []


def test_commit_lists_each_folder_once(tmp_path, monkeypatch):
    from eosink_files.store import LocalStore

    out = str(tmp_path / "out")
    calls = []
    listing = LocalStore.sizes

    def counted(self, folder, names):
        calls.append((folder, len(names)))
        return listing(self, folder, names)

    monkeypatch.setattr(LocalStore, "sizes", counted)
    days = ["a", "b", "a", "b"]
    parts = [[rows(0, p, day=days)] for p in range(3)]
    assert run(FilesSink(path=out, partition_by=["day"]), 0, parts).status == "committed"
    assert sorted(calls) == [("day=a", 3), ("day=b", 3)]


def test_memory_store_is_refused_where_spark_runs_the_tasks(memory_url, monkeypatch):
    # A Python worker started by Spark (the data source's planning worker) has this variable.
    monkeypatch.setenv("PYTHON_WORKER_FACTORY_SECRET", "x")
    with pytest.raises(ConfigurationError, match="memory:// lives in one process"):
        run(FilesSink(path=memory_url), 0)


def test_memory_store_is_fine_in_one_process(memory_url):
    for var in ("PYTHON_WORKER_FACTORY_SECRET", "SPARK_PYTHON_RUNTIME"):
        assert var not in os.environ
    assert run(FilesSink(path=memory_url), 0).status == "committed"


def test_commit_refuses_rows_without_files(tmp_path):
    # Spark's writer (the spark file writer) wrote the rows on the executors' own disks: the driver
    # moved no file of them into the folder, yet the batch counted rows
    import pyarrow as pa

    from eosink.plugin import Proof
    from eosink_files.sink import FilesMessage

    out = str(tmp_path / "out")
    sink = FilesSink(path=out)
    ctx = BatchContext("files", "w", 0, query_id="q1")
    state = sink.init(ctx, pa.schema([("id", pa.int64())]))
    with pytest.raises(UnreadableFilesError, match="5 row.* but no file"):
        sink.commit(ctx, state, [FilesMessage(files=(), rows=5)], Proof("w", 0, "q1", rows=5))
    assert committed_files(out) == []
