"""``python -m eosink_yt_emulator --port N``: serve the emulator until interrupted."""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from .server import YtEmulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eosink_yt_emulator",
        description="In-memory emulator of the YTsaurus HTTP proxy (API v4).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="port to bind (0 = a free port)")
    parser.add_argument(
        "--mount-delay",
        type=float,
        default=0.05,
        help="seconds a tablet stays in a transient state",
    )
    parser.add_argument("--max-rows-per-transaction", type=int, default=100000)
    args = parser.parse_args(argv)
    emu = YtEmulator(
        host=args.host,
        port=args.port,
        mount_delay=args.mount_delay,
        max_rows_per_transaction=args.max_rows_per_transaction,
    ).start()
    stop = threading.Event()

    def _stop(*_: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    print(f"listening on {emu.url}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
