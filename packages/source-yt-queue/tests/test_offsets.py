"""Batch planning on row counts: starting offsets, the row limit, ranges, trimmed rows."""

import pytest

from eosink import ConfigurationError
from eosink_yt_queue.offsets import (
    TabletCounts,
    TabletRange,
    TrimmedRowsError,
    check_not_trimmed,
    from_json,
    limit_rows,
    split,
    starting,
    to_json,
)

COUNTS = {0: TabletCounts(total=10, trimmed=2), 1: TabletCounts(total=5, trimmed=0)}


def test_starting_offsets():
    assert starting("earliest", COUNTS) == {0: 2, 1: 0}
    assert starting("LATEST", COUNTS) == {0: 10, 1: 5}
    assert starting('{"0": 4, "1": 1}', COUNTS) == {0: 4, 1: 1}
    with pytest.raises(ConfigurationError, match="missing \\[1\\]"):
        starting('{"0": 4}', COUNTS)
    with pytest.raises(ConfigurationError, match="not earliest, latest or a JSON"):
        starting("newest", COUNTS)


def test_json_round_trip():
    assert from_json(to_json({1: 5, 0: 3})) == {0: 3, 1: 5}
    assert list(to_json({1: 5, 0: 3})) == ["0", "1"]


def test_limit_rows_shares_fairly_and_never_exceeds():
    start = {0: 0, 1: 0, 2: 0, 3: 0}
    latest = {0: 100, 1: 2, 2: 0, 3: 100}
    assert limit_rows(start, latest, None) == latest
    end = limit_rows(start, latest, 50)
    assert sum(end.values()) == 50
    assert end[1] == 2 and end[2] == 0 and end[0] + end[3] == 48 and abs(end[0] - end[3]) <= 1
    assert limit_rows(start, latest, 1000) == latest
    assert sum(limit_rows(start, latest, 3).values()) == 3


def test_split_bounds_every_range():
    assert split({0: 5, 1: 0}, {0: 12, 1: 0}, 4) == [TabletRange(0, 5, 9), TabletRange(0, 9, 12)]


def test_trimmed_past_the_next_row_fails():
    check_not_trimmed("//q", {0: 2, 1: 0}, COUNTS)
    with pytest.raises(TrimmedRowsError, match="tablet 0: next row 1, trimmed up to 2"):
        check_not_trimmed("//q", {0: 1, 1: 0}, COUNTS)
