"""The delta sink's answers to ``eosink status|verify|cleanup`` (its operator hooks)."""

from __future__ import annotations

import os
import time

import pytest
from deltalake import DeltaTable
from delta_helpers import run
from eosink_delta.cleanup import ORPHAN
from eosink_delta.sink import DeltaSink

from eosink import ConfigurationError


def test_status_verify_and_cleanup_of_a_written_table(tmp_path):
    path = str(tmp_path / "table")
    sink = DeltaSink(path=path)
    for batch in range(3):
        run(sink, batch, writer_id="orders")
    run(sink, 5, writer_id="backfill")

    status = sink.target_status()
    assert [(p.writer_id, p.batch_id) for p in status.writers] == [("backfill", 5), ("orders", 2)]
    assert status.details["txns"] == {"backfill": 5, "orders": 2}
    assert status.details["table_version"] == 4 and status.details["files"] == 4

    verified = sink.verify_target()
    assert verified.ok and verified.checked == 2 + 4

    orphan = tmp_path / "table" / "part-orphan.parquet"
    orphan.write_bytes(b"PAR1")
    old = time.time() - 2 * 86400
    os.utime(orphan, (old, old))
    dry = sink.cleanup_target(older_than_s=86400, delete=False)
    assert dry.paths(ORPHAN) == ("part-orphan.parquet",) and orphan.exists()
    assert sink.cleanup_target(older_than_s=86400, delete=True).deleted and not orphan.exists()

    os.remove(DeltaTable(path).file_uris()[0].removeprefix("file://"))
    broken = sink.verify_target()
    assert len(broken.problems) == 1 and broken.problems[0].startswith("missing: ")


def test_a_folder_without_a_table_is_named(tmp_path):
    with pytest.raises(ConfigurationError, match="is not a Delta table"):
        DeltaSink(path=str(tmp_path)).target_status()
