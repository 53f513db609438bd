"""A queue that changes under a running (or restarted) query: tablets added by a reshard are
read from their first row; a queue removed and created again under the same path, or whose row
counts went backwards, is refused with the fix, never read from the old offsets.

The stream reader is driven here as Spark drives it (initialOffset, latestOffset, partitions,
read; a restart is a new reader given the checkpoint's last offset), against the emulator with
the real YT client, without a Spark session.
"""

from __future__ import annotations

import pytest
from conftest import append, make_queue, source_options

from eosink import ConfigurationError
from eosink_yt_queue.offsets import QueueChangedError
from eosink_yt_queue.source import YtQueueStreamReader, parse_options

Q = "//q/changing"


def reader_of(emulator) -> YtQueueStreamReader:
    return YtQueueStreamReader(parse_options({**source_options(emulator), "path": Q}))


def next_batch(reader: YtQueueStreamReader, start: dict) -> tuple[dict, list[int]]:
    """Plan the next batch after ``start`` and read it; its end offset and the ids read."""
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    ids = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            ids.extend(batch.column("id").to_pylist())
    return end, sorted(ids)


def reshard(yt, path: str, tablets: int) -> None:
    yt.unmount_table(path, sync=True)
    yt.reshard_table(path, tablet_count=tablets, sync=True)
    yt.mount_table(path, sync=True)


def test_tablets_added_by_a_reshard_are_read_from_their_first_row(yt_emulator):
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=2)
    append(yt, Q, 0, 0, 5)
    append(yt, Q, 1, 100, 5)
    reader = reader_of(yt_emulator)
    end, ids = next_batch(reader, reader.initialOffset())
    assert ids == [*range(0, 5), *range(100, 105)]

    reshard(yt, Q, 4)  # while the query runs
    assert yt.get(f"{Q}/@tablet_count") == 4
    append(yt, Q, 0, 5, 2)
    append(yt, Q, 2, 200, 3)
    append(yt, Q, 3, 300, 4)
    end, ids = next_batch(reader, end)
    assert ids == [5, 6, 200, 201, 202, 300, 301, 302, 303]
    assert end["queues"][Q] == {"0": 7, "1": 5, "2": 3, "3": 4}

    # a restart from the checkpoint's offset reads on from there
    append(yt, Q, 3, 304, 1)
    assert next_batch(reader_of(yt_emulator), end)[1] == [304]


def recreate(yt, path: str, tablets: int = 2) -> None:
    yt.unmount_table(path, sync=True)
    yt.remove(path)
    make_queue(yt, path, tablets=tablets)


def test_a_queue_created_again_under_the_same_path_is_refused(yt_emulator):
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=2)
    append(yt, Q, 0, 0, 10)
    reader = reader_of(yt_emulator)
    end, ids = next_batch(reader, reader.initialOffset())
    assert ids == list(range(10))

    recreate(yt, Q)
    append(yt, Q, 0, 1000, 3)  # row indexes 0..2 again, below the checkpoint's 10
    for running in (reader, reader_of(yt_emulator)):  # the running query, and a restart
        with pytest.raises(ConfigurationError) as error:
            next_batch(running, end)
        text = str(error.value)
        assert Q in text and "id changed" in text and "new checkpoint" in text, text

    # With more rows than the checkpoint read, the offsets look valid: still refused.
    append(yt, Q, 0, 2000, 20)
    with pytest.raises(ConfigurationError, match="id changed"):
        next_batch(reader_of(yt_emulator), end)


def read_planned(reader: YtQueueStreamReader, start: dict, end: dict) -> list[int]:
    """Read a batch Spark planned earlier (its offsets from the offset log), as Spark replays
    an unfinished batch: ``partitions`` and ``read`` only, no ``latestOffset``."""
    ids = []
    for partition in reader.partitions(start, end):
        for batch in reader.read(partition):
            ids.extend(batch.column("id").to_pylist())
    return sorted(ids)


def test_a_replayed_batch_of_a_queue_created_again_is_refused(yt_emulator):
    """Batch 0 is planned (its end offset in the offset log), then the query dies; the queue is
    removed and created again with as many rows. The restarted query replays batch 0 through
    ``partitions``/``read`` without ``latestOffset``: it must not read the new queue's rows as
    the old ones."""
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=2)
    append(yt, Q, 0, 0, 10)
    reader = reader_of(yt_emulator)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    planned = reader.partitions(start, end)  # tasks planned before the queue changed
    assert read_planned(reader, start, end) == list(range(10))

    recreate(yt, Q)
    append(yt, Q, 0, 1000, 10)  # row indexes 0..9 again, other rows
    with pytest.raises(QueueChangedError, match="id changed.*new checkpoint"):
        read_planned(reader_of(yt_emulator), start, end)  # the restarted query's replay
    for partition in planned:  # tasks of the running query, read after the change
        with pytest.raises(QueueChangedError, match="id changed"):
            list(reader.read(partition))


def test_rows_of_a_queue_created_again_while_a_task_reads_are_never_given(yt_emulator):
    """The queue is created again between two ``pull_queue`` requests of one task: the rows
    pulled from the new queue are refused, not handed to Spark."""
    yt = yt_emulator.client()
    make_queue(yt, Q, tablets=1)
    append(yt, Q, 0, 0, 10)
    options = parse_options({**source_options(yt_emulator, pullRows=4), "path": Q})
    reader = YtQueueStreamReader(options)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    (partition,) = reader.partitions(start, end)
    pulls = []

    def second_pull_meets_a_new_queue() -> None:
        pulls.append(1)
        if len(pulls) == 2:
            recreate(yt, Q, tablets=1)
            append(yt, Q, 0, 1000, 10)

    yt_emulator.faults.on_next("pull_queue", second_pull_meets_a_new_queue, times=2)
    given = []
    with pytest.raises(QueueChangedError, match="id changed"):
        for batch in reader.read(partition):
            given.extend(batch.column("id").to_pylist())
    assert len(pulls) == 2
    assert given == [0, 1, 2, 3]


def checkpoint_without_queue_ids(emulator, tablets: int, tablet: int, rows: int) -> dict:
    """Queue :data:`Q` made with ``tablets`` tablets and ``rows`` rows in ``tablet``, read by a
    first batch: the batch's end offset as a checkpoint written before offsets carried the
    queue's id."""
    yt = emulator.client()
    make_queue(yt, Q, tablets=tablets)
    append(yt, Q, tablet, 0, rows)
    reader = reader_of(emulator)
    end, _ = next_batch(reader, reader.initialOffset())
    return {"v": end["v"], "queues": end["queues"]}


def test_row_counts_that_went_backwards_are_refused(yt_emulator):
    """A checkpoint written before offsets carried the queue's id: the row counts tell."""
    yt = yt_emulator.client()
    older = checkpoint_without_queue_ids(yt_emulator, tablets=2, tablet=1, rows=10)

    recreate(yt, Q)
    append(yt, Q, 1, 1000, 4)
    with pytest.raises(ConfigurationError) as error:
        next_batch(reader_of(yt_emulator), older)
    text = str(error.value)
    assert "tablet 1" in text and "4 rows" in text and "read up to row 10" in text, text
    assert "new checkpoint" in text


def test_tablets_that_disappeared_are_refused(yt_emulator):
    yt = yt_emulator.client()
    older = checkpoint_without_queue_ids(yt_emulator, tablets=3, tablet=2, rows=4)
    recreate(yt, Q, tablets=2)
    with pytest.raises(ConfigurationError, match="tablet 2, read up to row 4, is gone"):
        next_batch(reader_of(yt_emulator), older)
