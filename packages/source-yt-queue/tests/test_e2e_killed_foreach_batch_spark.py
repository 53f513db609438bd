"""The foreachBatch door, one 4-tablet queue, driver killed mid-batch (see killed_e2e.py)."""

from killed_e2e import killed_mid_batch_and_restarted


def test_foreach_batch_killed_mid_batch_and_restarted(yt_emulator, tmp_path):
    killed_mid_batch_and_restarted(yt_emulator, tmp_path, "foreach_batch", ["//q/a"])
