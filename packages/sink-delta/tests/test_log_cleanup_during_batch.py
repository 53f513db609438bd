"""A batch that runs longer than ``delta.logRetentionDuration`` while other writers commit,
checkpoint and clean up the log: its commit must land above the newest checkpoint.

Log cleanup deletes the expired commits before a checkpoint, and with them the version numbers
the batch's view of the log would take next: a create-if-absent of such a number succeeds, and
a commit below the checkpoint is one no reader replays (the rows and the txn are lost while the
batch is reported committed). The commit re-reads the log tail first.
"""

from __future__ import annotations

import glob
import os

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from delta_helpers import commit_elsewhere, log_actions, run
from delta_history import age_log
from eosink_delta.sink import DeltaSink

from eosink.crash import set_crash_handler


def newest_checkpoint(path: str) -> int:
    names = glob.glob(os.path.join(path, "_delta_log", "*.checkpoint.parquet"))
    return max(int(os.path.basename(n).split(".")[0]) for n in names)


def maintain(path: str) -> None:
    """Another writer's commits, then a checkpoint and cleanup of what is now expired."""
    for i in range(3):
        other = pa.table({"id": pa.array([900 + i], pa.int64()), "name": ["foreign"]})
        write_deltalake(path, other, mode="append")
    DeltaTable(path).create_checkpoint()
    age_log(path, 31)  # the batch ran past delta.logRetentionDuration's default of 30 days
    DeltaTable(path).cleanup_metadata()


def run_racing(sink: DeltaSink, batch_id: int, foreign) -> object:
    def race(point: str) -> None:
        if point == "commit:checked":
            foreign()

    set_crash_handler(race)
    try:
        return run(sink, batch_id)
    finally:
        set_crash_handler(None)


def our_commit_versions(path: str) -> list[int]:
    return [v for v, a in log_actions(path) if "txn" in a and a["txn"]["appId"] == "w"]


def test_the_commit_lands_above_a_checkpoint_made_while_the_batch_ran(tmp_path):
    path = str(tmp_path / "t")
    sink = DeltaSink(path=path)
    assert run(sink, 0).status == "committed"
    assert run_racing(sink, 1, lambda: maintain(path)).status == "committed"
    checkpoint = newest_checkpoint(path)
    assert our_commit_versions(path) and min(our_commit_versions(path)) > checkpoint
    table = DeltaTable(path)
    assert table.transaction_version("w") == 1
    ids = sorted(table.to_pyarrow_table().column("id").to_pylist())
    assert ids == sorted([0, 1, 2, 3, 4, 1000, 1001, 1002, 1003, 1004, 900, 901, 902])
    assert run(sink, 2).status == "committed"
    assert DeltaTable(path).transaction_version("w") == 2


def test_another_attempt_committed_before_the_checkpoint(tmp_path):
    """The same writer's other attempt (a zombie) committed the batch, then the log was
    checkpointed and cleaned: ours is already committed, not written twice."""
    path = str(tmp_path / "t")
    sink = DeltaSink(path=path)
    assert run(sink, 0).status == "committed"

    def zombie_then_maintenance() -> None:
        commit_elsewhere(path, 1)
        maintain(path)

    outcome = run_racing(sink, 1, zombie_then_maintenance)
    assert outcome.status == "skipped"
    assert DeltaTable(path).transaction_version("w") == 1
    ids = DeltaTable(path).to_pyarrow_table().column("id").to_pylist()
    assert sorted(i for i in ids if 1000 <= i < 2000) == [1000, 1001, 1002, 1003, 1004]


def test_complete_mode_too(tmp_path):
    """Complete mode commits through delta-rs, which decides on the table brought up to date
    when the snapshot's own commit is gone (its guard since before this check)."""
    mode = "complete"
    path = str(tmp_path / "t")
    sink = DeltaSink(path=path)
    assert run(sink, 0, mode=mode).status == "committed"

    def race(point: str) -> None:
        if point == "commit:checked" and not getattr(race, "done", False):
            race.done = True
            maintain(path)

    set_crash_handler(race)
    try:
        outcome = run(sink, 1, mode=mode)
    finally:
        set_crash_handler(None)
    assert outcome.status == "committed"
    table = DeltaTable(path)
    assert table.transaction_version("w") == 1
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == [
        1000,
        1001,
        1002,
        1003,
        1004,
    ]
