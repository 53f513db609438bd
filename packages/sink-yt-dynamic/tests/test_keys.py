"""Pure logic: key plans, run encoding, overlap detection, table inspection (no cluster)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import yt.yson as yson
from eosink import ConfigurationError
from eosink_yt_dynamic.keys import (
    BUCKET_ROWS,
    KeyPlan,
    bucketed,
    check_unique_in_chunk,
    first_common,
    key_runs,
    union_runs,
)
from eosink_yt_dynamic.tables import inspect_output, output_columns

PLAN = KeyPlan(key=("queue_id", "tablet_index", "row_index"), row_column="row_index")


def chunk(queue, tablet, indexes):
    n = len(indexes)
    return pa.table({"queue_id": [queue] * n, "tablet_index": [tablet] * n, "row_index": indexes})


def test_runs_compress_contiguous_row_indexes():
    runs = key_runs(chunk("a", 0, [5, 3, 4, 9, 10, 20]), PLAN)
    assert [(v, f.tolist()) for v, f in runs] == [(["a", 0], [3, 6, 9, 11, 20, 21])]


@pytest.mark.parametrize(
    ("theirs", "hit"),
    [
        ([0, 3], None),
        ([6, 9], None),
        ([0, 4], 3),
        ([5, 6], 5),
        ([7, 8, 100, 200], None),
        ([2, 30], 3),
        ([7, 8, 10, 12], 10),
    ],
)
def test_common_row_is_exact(theirs, hit):
    mine = key_runs(chunk("a", 0, [3, 4, 5, 9, 10]), PLAN)[0][1]  # [3,6) [9,11)
    assert first_common(mine, np.array(theirs)) == hit


def test_buckets_split_runs_and_keep_groups_apart():
    b = BUCKET_ROWS
    rows = [b - 2, b - 1, b, b + 1, 3 * b + 5]
    pieces = bucketed(key_runs(chunk("a", 0, rows), PLAN) + key_runs(chunk("b", 0, [1]), PLAN))
    assert {k: f.tolist() for k, (_, f) in pieces.items()} == {
        ("a", 0, 0): [b - 2, b],
        ("a", 0, 1): [b, b + 2],
        ("a", 0, 3): [3 * b + 5, 3 * b + 6],
        ("b", 0, 0): [1, 2],
    }
    long_run = bucketed([(["a", 0], np.array([5, 2 * b + 1]))])
    assert {k[-1]: f.tolist() for k, (_, f) in long_run.items()} == {
        0: [5, b],
        1: [b, 2 * b],
        2: [2 * b, 2 * b + 1],
    }


def test_union_joins_touching_runs():
    assert union_runs(np.array([0, 3, 10, 12]), np.array([3, 5, 11, 20, 30, 31])).tolist() == [
        0,
        5,
        10,
        20,
        30,
        31,
    ]


def test_unique_check_in_chunk():
    check_unique_in_chunk(chunk("a", 0, [1, 2, 3]), PLAN, "//t")
    with pytest.raises(ConfigurationError, match="queue_id='a', tablet_index=0, row_index=2"):
        check_unique_in_chunk(chunk("a", 0, [1, 2, 2]), PLAN, "//t")
    with pytest.raises(ConfigurationError, match="row_index=2.*appears 2 times"):
        key_runs(chunk("a", 0, [2, 1, 2]), PLAN, "//t")


def test_output_columns_put_the_source_key_first():
    schema = pa.schema(
        [
            ("v", pa.string()),
            ("__spyt_streaming_src_tablet_index", pa.int64()),
            ("__spyt_streaming_src_row_index", pa.int64()),
        ]
    )
    columns = output_columns(schema, queue_id=True)
    assert [c["name"] for c in columns] == ["queue_id", "tablet_index", "row_index", "v"]
    assert [c.get("sort_order") for c in columns][:3] == ["ascending"] * 3


class FakeClient:
    def __init__(self, **attrs):
        self.attrs = attrs

    def exists(self, path):
        return True

    def get(self, path):
        return self.attrs[path.rsplit("@", 1)[1]]


def sorted_schema(unique: bool):
    schema = yson.YsonList(
        [
            {"name": "tablet_index", "type": "int64", "sort_order": "ascending"},
            {"name": "row_index", "type": "int64", "sort_order": "ascending"},
            {"name": "v", "type": "string"},
        ]
    )
    schema.attributes["unique_keys"] = unique
    return schema


def test_table_without_unique_keys_is_refused():
    client = FakeClient(
        type="table", dynamic=True, schema=sorted_schema(False), tablet_state="mounted"
    )
    with pytest.raises(ConfigurationError, match="unique_keys.*create_output_table"):
        inspect_output(client, "//t")
    client.attrs["schema"] = sorted_schema(True)
    assert len(inspect_output(client, "//t")) == 3
