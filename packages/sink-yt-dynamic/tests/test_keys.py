"""Pure logic: key plans, run encoding, overlap detection, table inspection (no cluster)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import yt.yson as yson
from eosink import ConfigurationError
from eosink_yt_dynamic.keys import (
    KeyPlan,
    check_unique_in_chunk,
    decode_runs,
    encode_runs,
    find_overlap,
    key_runs,
)
from eosink_yt_dynamic.tables import inspect_output, output_columns

PLAN = KeyPlan(key=("queue_id", "tablet_index", "row_index"), row_column="row_index")


def chunk(queue, tablet, indexes):
    n = len(indexes)
    return pa.table({"queue_id": [queue] * n, "tablet_index": [tablet] * n, "row_index": indexes})


def test_runs_compress_contiguous_row_indexes():
    runs = key_runs(chunk("a", 0, [5, 3, 4, 9, 10, 20]), PLAN)
    assert [(v, f.tolist()) for v, f in runs] == [(["a", 0], [3, 6, 9, 11, 20, 21])]
    assert [(v, f.tolist()) for v, f in decode_runs(encode_runs(runs))] == [
        (["a", 0], [3, 6, 9, 11, 20, 21])
    ]


@pytest.mark.parametrize(
    ("theirs", "hit"),
    [
        ([0, 3], None),
        ([6, 9], None),
        ([0, 4], 3),
        ([5, 6], 5),
        ([7, 8, 100, 200], None),
        ([2, 30], 3),
    ],
)
def test_overlap_is_exact(theirs, hit):
    mine = key_runs(chunk("a", 0, [3, 4, 5, 9, 10]), PLAN)  # [3,6) [9,11)
    other = [(["a", 0], np.array(theirs))]
    found = find_overlap(mine, [other])
    assert (found[1] if found else None) == hit


def test_other_groups_never_overlap():
    mine = key_runs(chunk("a", 0, [1, 2, 3]), PLAN)
    assert find_overlap(mine, [key_runs(chunk("b", 0, [1, 2, 3]), PLAN)]) is None
    assert find_overlap(mine, [key_runs(chunk("a", 1, [1, 2, 3]), PLAN)]) is None


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
