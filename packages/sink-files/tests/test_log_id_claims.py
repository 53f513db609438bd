"""One log id, one winner, whatever the name: ``<id>`` and ``<id>.compact`` are two names for
one id, and Spark's reader reads only one of them. Two writers that place the same id
differently (another ``compact_interval``, an append writer beside a complete-mode writer)
must not both publish it. Judged by the manifest oracle (Spark's reader's rules) and by a
fresh process's proofs.
"""

from __future__ import annotations

import os

import pytest
from eosink_files.log import LOG_DIR, ManifestError
from eosink_files.sink import FilesSink
from files_helpers import rows, run
from spark_manifest_oracle import read_committed

from eosink.plugin import BatchContext, ConfigurationError
from eosink.process import forget_process, simulated_process
from eosink.protocol import WriteTask, driver_plugins, finish, prepare
from eosink.registry import plugin_manager
from eosink.testing.local import LocalRunner

SCHEMA = rows(0).schema


@pytest.fixture(autouse=True)
def _processes():
    yield
    forget_process()


class HalfBatch:
    """A batch run in halves in simulated process ``pid``: prepare and write, then finish."""

    def __init__(self, pid: str, sink: FilesSink, writer: str, batch_id: int, mode="append"):
        self.pid, self.sink = pid, sink
        self.ctx = BatchContext("files", writer, batch_id, query_id=f"q-{writer}", mode=mode)
        self.pm = plugin_manager(sink, driver_plugins(()))
        self.parts = [[rows(batch_id + (500 if writer == "b" else 0), p)] for p in range(2)]
        with simulated_process(pid):
            prepared = prepare(self.pm, self.ctx, SCHEMA)
            assert prepared.skipped is None
            self.state = prepared.state
            self.results = LocalRunner(self.parts)(WriteTask(sink, self.ctx, self.state))

    def finish(self) -> str:
        with simulated_process(self.pid):
            return finish(self.pm, self.ctx, self.state, self.results).status

    def ids(self) -> list[int]:
        return [i for part in self.parts for b in part for i in b.column("id").to_pylist()]


def batch_ids(batch_id: int, writer: str = "a") -> list[int]:
    first = batch_id + (500 if writer == "b" else 0)
    return [i for p in range(2) for i in rows(first, p).column("id").to_pylist()]


def spark_ids(out: str) -> list[int]:
    table, _ = read_committed(out, SCHEMA)
    return sorted(table.column("id").to_pylist())


def proof_in_fresh_process(sink: FilesSink, writer: str, batch_id: int):
    with simulated_process("fresh"):
        ctx = BatchContext("files", writer, batch_id, query_id=f"q-{writer}")
        return plugin_manager(sink).hook.is_committed(ctx=ctx)


@pytest.mark.parametrize("first", ["delta", "compact"])
def test_two_compact_intervals_racing_for_one_id_lose_no_batch(tmp_path, first):
    """Writer a (interval 10) places id 4 as a delta, writer b (interval 5) as a compact, both
    from views read before either commit. One name wins the id; the other writer publishes
    after it, or (b, whose interval cannot read a log without ``4.compact``) is refused
    clearly: no batch reported committed is lost."""
    out = str(tmp_path / "out")
    a_sink = FilesSink(path=out, compact_interval=10)
    b_sink = FilesSink(path=out, compact_interval=5)
    with simulated_process("A"):
        for b in range(4):
            assert run(a_sink, b, writer="a", query="q-a").status == "committed"
    a4 = HalfBatch("A", a_sink, "a", 4)  # a's view: latest id 3, next 4 (a delta)
    b0 = HalfBatch("B", b_sink, "b", 0)  # b's view: latest id 3, next 4 (a compact at 5n-1)
    expected = [i for b in range(5) for i in batch_ids(b)]
    if first == "delta":
        assert a4.finish() == "committed"
        with pytest.raises(ManifestError, match="compact_interval"):
            b0.finish()
    else:
        assert b0.finish() == "committed"
        assert a4.finish() == "committed"
        expected += batch_ids(0, "b")
    names = set(os.listdir(os.path.join(out, LOG_DIR)))
    assert not {"4", "4.compact"} <= names, "one id published under both names"
    assert spark_ids(out) == sorted(expected)
    proof = proof_in_fresh_process(a_sink, "a", 4)
    assert proof is not None and proof.batch_id == 4
    if first == "compact":
        proof = proof_in_fresh_process(a_sink, "b", 0)
        assert proof is not None and proof.batch_id == 0


def test_complete_mode_racing_an_append_for_one_id_keeps_the_append_proof(tmp_path):
    """An append writer publishes id 4 as a delta; a complete-mode writer whose view still ends
    at 3 would publish ``4.compact`` (a compact replaces everything): the append's proof must
    not vanish (its restarted query would write the batch again)."""
    out = str(tmp_path / "out")
    sink = FilesSink(path=out)
    with simulated_process("A"):
        for b in range(4):
            assert run(sink, b, writer="a", query="q-a").status == "committed"
    a4 = HalfBatch("A", sink, "a", 4)
    b0 = HalfBatch("B", FilesSink(path=out), "b", 0, mode="complete")
    assert a4.finish() == "committed"
    assert b0.finish() == "committed"
    names = set(os.listdir(os.path.join(out, LOG_DIR)))
    assert not {"4", "4.compact"} <= names, "one id published under both names"
    proof = proof_in_fresh_process(sink, "a", 4)
    assert proof is not None and proof.batch_id == 4
    assert spark_ids(out) == sorted(batch_ids(0, "b"))  # complete mode: only b's rows


@pytest.mark.parametrize(
    ("option", "mine", "theirs"),
    [("format", "parquet", "json"), ("partition_by", [], ["name"])],
)
def test_a_writer_of_another_layout_committing_during_a_batch_makes_its_commit_refused(
    tmp_path, option, mine, theirs
):
    """Found by the kit's histories (a batch overtaken by another writer's commits): writer a
    (Parquet, say) passes init on an empty folder and writes its batch; meanwhile writer b
    (JSON) commits its first batch. a's commit must be refused, naming the folder's format,
    as its init would have been: published, its files would sit in the log beside b's, and
    Spark's reader (one format, one layout a folder) fails or drops one writer's rows."""
    out = str(tmp_path / "out")
    a = HalfBatch("A", FilesSink(path=out, **{option: mine}), "a", 0)
    with simulated_process("B"):
        sink = FilesSink(path=out, **{option: theirs})
        assert run(sink, 0, writer="b", query="q-b").status == "committed"
    with pytest.raises(ConfigurationError, match="Spark's reader cannot mix|in one format"):
        a.finish()
    partition_by = theirs if option == "partition_by" else []
    table, _ = read_committed(out, SCHEMA, partition_by, format=None)  # format: the files'
    assert sorted(table.column("id").to_pylist()) == sorted(batch_ids(0))  # b's rows only
    assert proof_in_fresh_process(FilesSink(path=out, **{option: theirs}), "a", 0) is None


# -- a late abort (finding 17) ---------------------------------------------------------------
def late_abort(batch: HalfBatch) -> None:
    """The zombie driver's abort of ``batch``, run after everything else."""
    with simulated_process(batch.pid):
        messages = [r.message for r in batch.results]
        batch.pm.hook.abort(ctx=batch.ctx, state=batch.state, messages=messages)


def test_late_abort_of_a_committed_attempt_keeps_its_files(tmp_path):
    """A zombie driver's attempt committed batch 0 (its driver saw an error after the publish),
    the restarted query skipped it and committed 14 more batches (a compact keeps only the
    latest 10 proofs of a writer); then the zombie aborts: the published files stay."""
    out = str(tmp_path / "out")
    zombie = HalfBatch("Z", FilesSink(path=out, compact_interval=3), "a", 0)
    assert zombie.finish() == "committed"
    with simulated_process("R"):
        for b in range(1, 15):  # compacts at 2, 5, .., 14: the last one keeps batches 5 .. 14
            sink = FilesSink(path=out, compact_interval=3)
            assert run(sink, b, writer="a", query="q-a").status == "committed"
    late_abort(zombie)
    assert spark_ids(out) == sorted(i for b in range(15) for i in batch_ids(b))


def test_late_abort_of_an_attempt_that_lost_still_removes_its_files(tmp_path):
    """An attempt whose batch another attempt committed removes its own files (they are
    listed by nothing): a late abort keeps only what it cannot tell apart."""
    out = str(tmp_path / "out")
    zombie = HalfBatch("Z", FilesSink(path=out), "a", 0)
    with simulated_process("R"):
        assert run(FilesSink(path=out), 0, writer="a", query="q-a").status == "committed"
    written = [f.relpath for r in zombie.results for f in r.message.files]
    assert all(os.path.exists(os.path.join(out, p)) for p in written)
    late_abort(zombie)
    assert not any(os.path.exists(os.path.join(out, p)) for p in written)
    assert spark_ids(out) == sorted(batch_ids(0))


def test_a_refused_commit_leaves_its_process_view_whole(tmp_path):
    """Found by the kit with Spark's reader: writer b (interval 5) is refused because writer a
    (interval 10) published id 4 as a delta. b's retry in the same process must read the log
    as it is, not as a view the refusal left half updated (the new ids known, the files
    Spark's reader reads not): from that view b published a compact that listed none of a's
    latest files, and Spark's reader lost a's batches."""
    out = str(tmp_path / "out")
    a_sink = FilesSink(path=out, compact_interval=10)
    b_sink = FilesSink(path=out, compact_interval=5)
    with simulated_process("A"):
        for b in range(4):
            assert run(a_sink, b, writer="a", query="q-a").status == "committed"
    a4 = HalfBatch("A", a_sink, "a", 4)
    b0 = HalfBatch("B", b_sink, "b", 0)
    assert a4.finish() == "committed"
    with pytest.raises(ManifestError, match="compact_interval"):
        b0.finish()
    expected = [i for b in range(5) for i in batch_ids(b)]
    for retry in range(2):  # the same process retries the batch (a restarted query's task)
        with simulated_process("B"), pytest.raises(ManifestError, match="compact_interval"):
            run(b_sink, 0, writer="b", query="q-b")
        assert spark_ids(out) == sorted(expected), f"retry {retry}"
    proof = proof_in_fresh_process(a_sink, "a", 4)
    assert proof is not None and proof.batch_id == 4
