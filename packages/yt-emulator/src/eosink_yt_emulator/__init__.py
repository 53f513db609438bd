"""An in-memory emulator of the YTsaurus HTTP proxy (API v4) for tests.

The real, unmodified ``yt.wrapper.YtClient`` talks to it over HTTP::

    from eosink_yt_emulator import YtEmulator

    with YtEmulator() as emu:
        yt = emu.client()
        yt.create("table", "//tmp/t", attributes={"schema": [{"name": "a", "type": "int64"}]})
        yt.write_table("//tmp/t", [{"a": 1}])
        emu.faults.fail_next("commit_transaction", when="after", kind="lost_reply")

See the package README for the fault API, the pytest fixture and the list of
behaviours with the YTsaurus documentation they follow.
"""

from .errors import YtError
from .faults import Faults, RequestLog
from .server import EmulatorProcess, RemoteFaults, YtEmulator, client_config, fast_retry_config

__all__ = [
    "YtEmulator",
    "EmulatorProcess",
    "RemoteFaults",
    "Faults",
    "RequestLog",
    "YtError",
    "client_config",
    "fast_retry_config",
]
