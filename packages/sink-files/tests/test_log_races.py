"""Several writers, one folder, each with the view of the log its own process keeps.

A writer's view says which log id is next. Another process's commits and expiry move the log
on meanwhile: a slot the view still thinks free may be one that existed and was expired. A
publication there succeeds (the name is free again) but no reader reads it: Spark's reader
starts at the latest compact, far above. These tests run two writers as two simulated
processes (``eosink.process``) and let the cleanup delay pass on a controlled clock
(``eosink.clock``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from eosink_files import read_table
from eosink_files.log import LOG_DIR, log_files, reader_plan
from eosink_files.sink import FilesSink
from eosink_files.store import LocalStore
from files_helpers import record_listings, rows, run

from eosink.plugin import BatchContext
from eosink.clock import set_clock
from eosink.process import forget_process, simulated_process
from eosink.protocol import WriteTask, driver_plugins, finish, prepare
from eosink.registry import plugin_manager
from eosink.testing.local import LocalRunner

DELAY_S = 60.0
INTERVAL = 2  # compacts at 1, 3, 5, ...: compaction and expiry after a few commits


class Clock:
    """The wall clock plus an offset the test moves forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock() -> Iterator[Clock]:
    clock = Clock()
    set_clock(clock)
    try:
        yield clock
    finally:
        set_clock(None)
        forget_process()


def sink(out: str) -> FilesSink:
    return FilesSink(path=out, compact_interval=INTERVAL, log_cleanup_delay_s=DELAY_S)


def commit_as(pid: str, out: str, batches: range, writer: str = "b") -> None:
    with simulated_process(pid):
        for b in batches:
            assert run(sink(out), b, writer=writer, query=f"q-{writer}").status == "committed"


class Batch:
    """A batch of writer ``a`` in process ``A``, run in halves: prepare and write, then finish."""

    def __init__(self, out: str, batch_id: int = 0) -> None:
        self.sink = sink(out)
        self.ctx = BatchContext("files", "a", batch_id, query_id="q-a")
        self.pm = plugin_manager(self.sink, driver_plugins(()))
        self.parts = [[rows(100 + batch_id, p)] for p in range(2)]
        with simulated_process("A"):
            prepared = prepare(self.pm, self.ctx, self.parts[0][0].schema)
            assert prepared.skipped is None
            self.state = prepared.state
            self.results = LocalRunner(self.parts)(WriteTask(self.sink, self.ctx, self.state))

    def finish(self) -> str:
        with simulated_process("A"):
            return finish(self.pm, self.ctx, self.state, self.results).status

    def ids(self) -> list[int]:
        return [i for part in self.parts for b in part for i in b.column("id").to_pylist()]


def ids_of(batches: range) -> list[int]:
    return [i for b in batches for p in range(2) for i in rows(b, p).column("id").to_pylist()]


def assert_everything_readable(out: str, expected: list[int]) -> None:
    """Every committed row, once, for the sink's reader; Spark's plan of the log is readable;
    a fresh process finds writer a's proof."""
    listing = log_files(os.listdir(os.path.join(out, LOG_DIR)))
    reader_plan(listing, INTERVAL)  # raises where Spark's reader would fail
    held = read_table(out, compact_interval=INTERVAL).column("id").to_pylist()
    assert sorted(held) == sorted(expected)
    with simulated_process("fresh"):
        ctx = BatchContext("files", "a", 0, query_id="q-a")
        proof = plugin_manager(sink(out)).hook.is_committed(ctx=ctx)
    assert proof is not None and proof.batch_id == 0


def test_batch_older_than_the_cleanup_delay_publishes_after_the_others(tmp_path, clock):
    """A's batch outlives the cleanup delay while B commits past two compactions and expires
    the ids after the latest A saw: A must not publish into the expired slot."""
    out = str(tmp_path / "out")
    commit_as("B", out, range(2))  # ids 0 and 1.compact
    slow = Batch(out)  # A saw latest id 1: its next id is 2
    clock.advance(DELAY_S + 1)
    commit_as("B", out, range(2, 8))  # ids 2 .. 7.compact; B expires 0 .. 4
    assert "2" not in os.listdir(os.path.join(out, LOG_DIR))
    assert slow.finish() == "committed"
    assert_everything_readable(out, ids_of(range(8)) + slow.ids())
    commit_as("B", out, range(8, 10))  # B's view sees A's entry and carries on
    assert_everything_readable(out, ids_of(range(10)) + slow.ids())


def test_publication_that_outlasts_the_cleanup_delay_is_withdrawn(tmp_path, clock, monkeypatch):
    """A's view is fresh when it publishes, but the publication itself takes longer than the
    cleanup delay (a long compaction stream, a stalled store): meanwhile B commits past two
    compactions and expires the id A is creating. A must withdraw that entry and publish
    again where readers read it."""
    out = str(tmp_path / "out")
    commit_as("B", out, range(2))
    slow = Batch(out)
    publish, stalled = LocalStore.publish, []

    def stalling(self, relpath, data, crash=None, overwrite=False):
        if relpath == f"{LOG_DIR}/2" and not stalled:
            stalled.append(relpath)  # A's publication of id 2 stalls here...
            clock.advance(DELAY_S + 1)
            commit_as("B", out, range(2, 8))  # ...while B commits ids 2 .. 7, expires 0 .. 4
            assert "2" not in os.listdir(os.path.join(out, LOG_DIR))
        return publish(self, relpath, data, crash, overwrite)

    monkeypatch.setattr(LocalStore, "publish", stalling)
    assert slow.finish() == "committed"
    assert stalled == [f"{LOG_DIR}/2"]
    assert "2" not in os.listdir(os.path.join(out, LOG_DIR))  # A's dead entry is gone
    assert_everything_readable(out, ids_of(range(8)) + slow.ids())


def test_a_view_older_than_the_cleanup_delay_is_listed_again(tmp_path, clock, monkeypatch):
    """Probing the ids after a view's latest is sound only while the view is recent: later,
    an expiry may remove the latest file and the next ones between two probes, so a stale
    view lists the log again."""
    out = str(tmp_path / "out")
    listed = record_listings(monkeypatch)
    commit_as("B", out, range(3))
    assert listed.count(LOG_DIR) == 1  # the first use lists; the next batches probe
    clock.advance(DELAY_S / 4)
    commit_as("B", out, range(3, 4))
    assert listed.count(LOG_DIR) == 1
    clock.advance(DELAY_S / 2)
    commit_as("B", out, range(4, 5))
    assert listed.count(LOG_DIR) == 2


def test_compaction_whose_source_compact_was_expired_publishes_again(tmp_path, clock, monkeypatch):
    """A's commit streams the previous compact into its own; before it reads it, B commits past
    two compactions and expires that compact. A must publish again after B's entries, not stop
    the query with a FileNotFoundError."""
    out = str(tmp_path / "out")
    commit_as("B", out, range(3))  # ids 0, 1.compact, 2
    slow = Batch(out)  # A's next id is 3, a compact: it streams 1.compact
    publish, stalled = LocalStore.publish, []

    def stalling(self, relpath, data, crash=None, overwrite=False):
        if relpath == f"{LOG_DIR}/3.compact" and not stalled:
            stalled.append(relpath)
            clock.advance(DELAY_S + 1)
            commit_as("B", out, range(3, 9))  # ids 3 .. 8; B expires 0 .. 4
            assert "1.compact" not in os.listdir(os.path.join(out, LOG_DIR))
        return publish(self, relpath, data, crash, overwrite)

    monkeypatch.setattr(LocalStore, "publish", stalling)
    assert slow.finish() == "committed"
    assert stalled == [f"{LOG_DIR}/3.compact"]
    assert_everything_readable(out, ids_of(range(9)) + slow.ids())


def test_catching_up_with_many_commits_lists_the_log_once(tmp_path, clock, monkeypatch):
    """A's view is recent, but B has committed many batches since: finding them costs one
    listing, not two probes per new log file."""
    out = str(tmp_path / "out")
    commit_as("A", out, range(1), writer="a")
    commit_as("B", out, range(40))
    probes, probe = [], LocalStore.probe

    def counted(self, relpaths, tail=None):
        probes.append(relpaths)
        return probe(self, relpaths, tail)

    monkeypatch.setattr(LocalStore, "probe", counted)
    listed = record_listings(monkeypatch)
    with simulated_process("A"):
        ctx = BatchContext("files", "a", 1, query_id="q-a")
        assert plugin_manager(sink(out)).hook.is_committed(ctx=ctx) is None
    assert len(probes) + len(listed) <= 6, (len(probes), listed)
    commit_as("A", out, range(1, 2), writer="a")
    assert_everything_readable(out, ids_of(range(40)) + ids_of(range(2)))
