"""The transactional mode moves the YT queue consumer named in the batch's checkpoint offsets in
the batch's tablet transaction: with the rows and the proof, or not at all.

The checkpoint is written here as Spark writes its offset log, with the offset JSON of
eosink-yt-queue (its own ``to_json``: the two packages' contract)."""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pytest
from conftest import make_sink_for

from eosink.plugin import BatchContext
from eosink.testing import LocalRunner, run_batch
from eosink.testing.faults import FaultPlugin, InjectedCrash
from eosink_yt_dynamic import create_output_table
from eosink_yt_emulator.queue_tables import consumer_offsets, create_consumer, create_queue
from eosink_yt_queue.offsets import to_json

OUT = "//home/eosink/totals"
SCHEMA = pa.schema([("user_id", pa.int64()), ("n", pa.int64())])
Q, C = "//home/q/events", "//home/q/consumer"


def rows(*items: tuple) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [dict(zip(SCHEMA.names, item)) for item in items], schema=SCHEMA
    )


@pytest.fixture
def queue(yt):
    create_output_table(yt, OUT, SCHEMA, key=["user_id"])
    create_queue(yt, Q, [{"name": "v", "type": "int64"}], 2)
    create_consumer(yt, C)
    yt.register_queue_consumer(Q, C, vital=False)
    return Q


def write_offsets(checkpoint, batch_id: int, *sources: dict | None) -> None:
    """``offsets/<batch id>`` as Spark writes it before the batch runs."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}})]
    lines += ["-" if s is None else json.dumps(s) for s in sources]
    (folder / str(batch_id)).write_text("\n".join(lines), encoding="utf-8")


def queue_end(emulator, *ends: int, consumer: str | None = C, proxy: str | None = None) -> dict:
    """The yt-queue source's end offset JSON of a batch: ``ends`` per tablet of :data:`Q`."""
    offsets = {(Q, t): n for t, n in enumerate(ends)}
    return to_json(offsets, {Q: "1-2-3-4"}, consumer, proxy or emulator.url)


def run(emulator, checkpoint, batch_id: int, batch: pa.RecordBatch, **kwargs):
    sink = make_sink_for(emulator, OUT, mode="transactional")
    ctx = BatchContext(
        sink=sink.name, writer_id="totals", batch_id=batch_id, checkpoint=str(checkpoint)
    )
    return run_batch(sink, ctx, SCHEMA, LocalRunner([[batch]]), **kwargs)


def held(yt) -> dict[int, int]:
    return {r["user_id"]: r["n"] for r in yt.select_rows(f"* from [{OUT}]")}


def proof_batch(yt) -> int | None:
    proofs = [json.loads(r["proof"]) for r in yt.select_rows(f"* from [{OUT}_eosink_progress]")]
    return max((p["batch_id"] for p in proofs), default=None)


def test_the_consumer_moves_to_the_batchs_end_in_the_batchs_transaction(
    yt_emulator, yt, queue, tmp_path
):
    write_offsets(tmp_path, 0, queue_end(yt_emulator, 5, 3))
    yt_emulator.requests.clear()
    run(yt_emulator, tmp_path, 0, rows((1, 1)))
    assert consumer_offsets(yt, C) == {(Q, 0): 5, (Q, 1): 3}
    assert held(yt) == {1: 1} and proof_batch(yt) == 0
    (commit,) = yt_emulator.requests.of("commit_transaction")
    advances = yt_emulator.requests.of("advance_consumer")
    assert len(advances) == 2
    assert {r["transaction_id"] for r in advances} == {commit["transaction_id"]}

    write_offsets(tmp_path, 1, None, queue_end(yt_emulator, 9, 3))  # a second source, idle
    yt_emulator.requests.clear()
    run(yt_emulator, tmp_path, 1, rows((1, 2)))
    assert consumer_offsets(yt, C) == {(Q, 0): 9, (Q, 1): 3}
    advanced = [
        (int(r["params"]["partition_index"]), int(r["params"]["old_offset"]))
        for r in yt_emulator.requests.of("advance_consumer")
    ]
    assert advanced == [(0, 5)]  # the tablet that moved, checked against the offset read


@pytest.mark.parametrize(
    "fault",
    [
        FaultPlugin("inside_commit", name="commit:before-transaction-commit"),
        FaultPlugin("before_commit"),
    ],
    ids=["inside-commit", "before-commit"],
)
def test_a_failed_batch_moves_neither_rows_nor_consumer(yt_emulator, yt, queue, tmp_path, fault):
    write_offsets(tmp_path, 0, queue_end(yt_emulator, 5, 3))
    run(yt_emulator, tmp_path, 0, rows((1, 1)))
    write_offsets(tmp_path, 1, queue_end(yt_emulator, 8, 4))
    with pytest.raises(InjectedCrash):
        run(yt_emulator, tmp_path, 1, rows((1, 2)), plugins=[fault])
    assert consumer_offsets(yt, C) == {(Q, 0): 5, (Q, 1): 3}
    assert held(yt) == {1: 1} and proof_batch(yt) == 0
    assert yt_emulator.state.txm.active_ids() == []
    run(yt_emulator, tmp_path, 1, rows((1, 2)))  # the replay commits both
    assert consumer_offsets(yt, C) == {(Q, 0): 8, (Q, 1): 4}
    assert held(yt) == {1: 2} and proof_batch(yt) == 1


def test_a_replayed_batch_is_skipped_and_never_moves_the_consumer_back(
    yt_emulator, yt, queue, tmp_path
):
    write_offsets(tmp_path, 0, queue_end(yt_emulator, 5, 3))
    write_offsets(tmp_path, 1, queue_end(yt_emulator, 8, 4))
    run(yt_emulator, tmp_path, 0, rows((1, 1)))
    run(yt_emulator, tmp_path, 1, rows((1, 2)))
    outcome = run(yt_emulator, tmp_path, 0, rows((1, 1)))
    assert outcome.status == "skipped"
    assert consumer_offsets(yt, C) == {(Q, 0): 8, (Q, 1): 4}
    assert held(yt) == {1: 2}


def test_a_tablet_the_consumer_passed_already_is_left_alone(yt_emulator, yt, queue, tmp_path):
    yt.advance_consumer(C, Q, 1, old_offset=None, new_offset=20)  # another reader went further
    write_offsets(tmp_path, 0, queue_end(yt_emulator, 5, 3))
    run(yt_emulator, tmp_path, 0, rows((1, 1)))
    assert consumer_offsets(yt, C) == {(Q, 0): 5, (Q, 1): 20}


@pytest.mark.parametrize(
    "line",
    [
        "other-cluster",  # the queue's consumer lives on another cluster
        "no-consumer",  # offsets of a source without a consumer, or written before they named it
        "missing",  # no offset log entry for the batch: logged, the batch commits
    ],
)
def test_no_consumer_to_move_here_and_the_batch_commits(
    yt_emulator, yt, queue, tmp_path, line, caplog
):
    if line == "other-cluster":
        write_offsets(tmp_path, 0, queue_end(yt_emulator, 5, 3, proxy="other.example:80"))
    elif line == "no-consumer":
        write_offsets(tmp_path, 0, queue_end(yt_emulator, 5, 3, consumer=None))
    with caplog.at_level(logging.INFO, logger="eosink"):
        run(yt_emulator, tmp_path, 0, rows((1, 1)))
    assert held(yt) == {1: 1} and proof_batch(yt) == 0
    assert consumer_offsets(yt, C) == {}
    if line == "missing":
        assert "consumer_offsets_unreadable" in caplog.text


def test_an_advance_yt_refuses_is_logged_and_the_batch_commits(
    yt_emulator, yt, queue, tmp_path, caplog
):
    write_offsets(tmp_path, 0, {**queue_end(yt_emulator, 5, 3), "consumer": "//home/q/none"})
    with caplog.at_level(logging.INFO, logger="eosink"):
        run(yt_emulator, tmp_path, 0, rows((1, 1)))
    assert held(yt) == {1: 1} and proof_batch(yt) == 0
    assert "consumer_not_advanced" in caplog.text
