"""Add paths are URIs, encoded exactly as delta-rs encodes them (arrow file writer)."""

from __future__ import annotations

import os
from urllib.parse import unquote

from add_paths import ODD_VALUES, delta_rs_folders, folders_by_value, odd_rows
from deltalake import DeltaTable
from eosink_delta.sink import DeltaSink
from delta_helpers import log_actions, run


def test_add_paths_equal_delta_rs_for_odd_partition_values(tmp_path):
    path = str(tmp_path / "table")
    batch = odd_rows().to_batches()[0]
    assert run(DeltaSink(path=path, partition_by=["p"]), 0, [batch]).status == "committed"
    ours = folders_by_value(path)
    # The protocol reads an empty partition string as null; eosink writes it as null (one
    # partition with the nulls, as Spark's writer makes it), where delta-rs keeps "" in a
    # folder of its own. Both read back as null.
    expected = {k: v for k, v in delta_rs_folders(str(tmp_path)).items() if k != ""}
    assert ours == expected
    for _version, action in log_actions(path):
        if "add" in action:  # the file is where the add path, decoded as a URI, points
            assert os.path.isfile(os.path.join(path, unquote(action["add"]["path"])))
    back = DeltaTable(path).to_pyarrow_table().sort_by("id").to_pylist()
    reference = DeltaTable(str(tmp_path / "written-by-delta-rs")).to_pyarrow_table()
    assert back == reference.sort_by("id").to_pylist()
    assert len(back) == len(ODD_VALUES)
