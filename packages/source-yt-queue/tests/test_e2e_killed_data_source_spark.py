"""The data source door, two 4-tablet queues and a queue id, driver killed mid-batch (see
killed_e2e.py)."""

from killed_e2e import killed_mid_batch_and_restarted


def test_data_source_two_queues_killed_mid_batch_and_restarted(yt_emulator, tmp_path):
    killed_mid_batch_and_restarted(yt_emulator, tmp_path, "data_source", ["//q/a", "//q/b"])
