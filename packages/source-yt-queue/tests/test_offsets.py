"""Batch planning on row counts: the offset JSON, starting offsets, the row limit, ranges,
trimmed rows, and the options that decide what is read."""

import pytest

from eosink import ConfigurationError
from eosink_yt_queue import QueueOptions
from eosink_yt_queue.offsets import (
    QueueChangedError,
    TabletCounts,
    TabletRange,
    TrimmedRowsError,
    cap,
    check_not_trimmed,
    check_same_queues,
    from_json,
    ids_from_json,
    limit_rows,
    split,
    starting,
    to_json,
)

Q, R = "//q/a", "//q/b"
COUNTS = {(Q, 0): TabletCounts(total=10, trimmed=2), (Q, 1): TabletCounts(total=5, trimmed=0)}


def test_offsets_carry_the_queues_ids_and_older_ones_read_without():
    offsets = {(Q, 0): 3}
    written = to_json(offsets, {Q: "1-2-3-4"})
    assert written == {"v": 1, "queues": {Q: {"0": 3}}, "ids": {Q: "1-2-3-4"}}
    assert from_json(written) == offsets and ids_from_json(written) == {Q: "1-2-3-4"}
    assert ids_from_json({"v": 1, "queues": {Q: {"0": 3}}}) == {}


def test_offsets_name_the_consumer_and_its_cluster_for_a_sink_that_moves_it():
    """A sink writing into the queue's cluster moves the consumer with the batch's rows
    (eosink_yt_common.queue_offsets reads what is written here); without a consumer the
    offsets are as before, and both read back the same."""
    from eosink_yt_common.queue_offsets import consumer_position

    offsets = {(Q, 0): 3, (Q, 1): 9}
    written = to_json(offsets, {Q: "1-2-3-4"}, "//q/consumer", "cluster:80")
    assert written["consumer"] == "//q/consumer" and written["proxy"] == "cluster:80"
    assert from_json(written) == offsets and ids_from_json(written) == {Q: "1-2-3-4"}
    position = consumer_position(written)
    assert position is not None and position.offsets == offsets
    assert (position.consumer, position.proxy) == ("//q/consumer", "cluster:80")
    assert "consumer" not in to_json(offsets, {Q: "1-2-3-4"}, None, "cluster:80")
    assert consumer_position(to_json(offsets)) is None


def test_same_queues_pass_and_a_gained_tablet_is_fine():
    start = {(Q, 0): 10, (Q, 1): 5}
    gained = {**COUNTS, (Q, 2): TabletCounts(total=4, trimmed=0)}
    check_same_queues(start, {Q: "a"}, gained, {Q: "a"})
    check_same_queues(start, {}, gained, {Q: "a"})  # an offset written without ids
    assert limit_rows(start, {t: c.total for t, c in gained.items()}, None)[(Q, 2)] == 4


@pytest.mark.parametrize(
    ("start", "counts", "ids", "message"),
    [
        ({(Q, 0): 3}, COUNTS, {Q: "b"}, "id changed from a to b"),
        ({(Q, 1): 6}, COUNTS, {Q: "a"}, "tablet 1 holds 5 rows, .* read up to row 6"),
        ({(Q, 2): 1}, COUNTS, {Q: "a"}, "tablet 2, read up to row 1, is gone .the queue has 2 "),
    ],
)
def test_a_changed_queue_is_refused_with_the_fix(start, counts, ids, message):
    with pytest.raises(QueueChangedError, match=message) as error:
        check_same_queues(start, {Q: "a"}, counts, ids)
    assert "new checkpoint" in str(error.value) and isinstance(error.value, ConfigurationError)


def test_offset_json_is_versioned_and_keyed_by_queue():
    offsets = {(R, 0): 7, (Q, 1): 5, (Q, 0): 3}
    assert to_json(offsets) == {"v": 1, "queues": {Q: {"0": 3, "1": 5}, R: {"0": 7}}}
    assert from_json(to_json(offsets)) == offsets


@pytest.mark.parametrize("written", [{"0": 3}, {"v": 2, "queues": {}}, [1, 2]])
def test_offsets_of_another_version_are_refused(written):
    with pytest.raises(ConfigurationError, match="not eosink-yt-queue offsets of version 1"):
        from_json(written)


def test_starting_offsets():
    assert starting("earliest", COUNTS) == {(Q, 0): 2, (Q, 1): 0}
    assert starting("LATEST", COUNTS) == {(Q, 0): 10, (Q, 1): 5}
    assert starting('{"0": 4, "1": 1}', COUNTS) == {(Q, 0): 4, (Q, 1): 1}
    assert starting('{"//q/a": {"0": 4, "1": 1}}', COUNTS) == {(Q, 0): 4, (Q, 1): 1}
    with pytest.raises(ConfigurationError, match=r"missing \[\('//q/a', 1\)\]"):
        starting('{"0": 4}', COUNTS)
    with pytest.raises(ConfigurationError, match="not earliest, latest or a JSON"):
        starting("newest", COUNTS)
    two = {**COUNTS, (R, 0): TabletCounts(total=1, trimmed=0)}
    with pytest.raises(ConfigurationError, match="not earliest, latest or a JSON"):
        starting('{"0": 4, "1": 1}', two)  # which queue?


def test_limit_rows_shares_fairly_and_never_exceeds():
    start = {(Q, 0): 0, (Q, 1): 0, (R, 0): 0, (R, 1): 0}
    latest = {(Q, 0): 100, (Q, 1): 2, (R, 0): 0, (R, 1): 100}
    assert limit_rows(start, latest, None) == latest
    end = limit_rows(start, latest, 50)
    assert sum(end.values()) == 50
    assert end[(Q, 1)] == 2 and end[(R, 0)] == 0
    assert end[(Q, 0)] + end[(R, 1)] == 48 and abs(end[(Q, 0)] - end[(R, 1)]) <= 1
    assert limit_rows(start, latest, 1000) == latest
    assert sum(limit_rows(start, latest, 3).values()) == 3


def test_available_now_target_caps_the_latest_rows():
    latest = {(Q, 0): 100, (Q, 1): 40}
    assert cap(latest, None) == latest
    assert cap(latest, {(Q, 0): 60, (Q, 1): 50}) == {(Q, 0): 60, (Q, 1): 40}
    assert cap({**latest, (R, 0): 9}, {(Q, 0): 60}) == {(Q, 0): 60, (Q, 1): 40, (R, 0): 9}


def test_split_bounds_every_range():
    assert split({(Q, 0): 5, (R, 0): 0}, {(Q, 0): 12, (R, 0): 2}, 4) == [
        TabletRange(Q, 0, 5, 9),
        TabletRange(Q, 0, 9, 12),
        TabletRange(R, 0, 0, 2),
    ]


def test_trimmed_past_the_next_row_fails():
    check_not_trimmed({(Q, 0): 2, (Q, 1): 0}, COUNTS)
    with pytest.raises(TrimmedRowsError, match="queue //q/a tablet 0: next row 1, trimmed up to 2"):
        check_not_trimmed({(Q, 0): 1, (Q, 1): 0}, COUNTS)


def test_options_of_several_queues():
    options = QueueOptions(proxy="p", path=" //q/a, //q/b ", queue_id_column="queue_id")
    assert options.queues == [Q, R]
    with pytest.raises(ConfigurationError, match="Set queueIdColumn"):
        QueueOptions(proxy="p", path="//q/a,//q/b", include_service_columns=True)
    with pytest.raises(ConfigurationError, match="several different ones"):
        QueueOptions(proxy="p", path="//q/a,//q/a")
