"""Independent checks of what the emulated cluster holds."""

from __future__ import annotations

import os
from typing import Any

STAGING_SUFFIXES = ("_eosink_staging", "_tmp", "_sorted", "_merged")


def read_rows(yt: Any, path: str) -> list[dict[str, Any]]:
    if not yt.exists(path):
        return []
    return list(yt.read_table(path))


def leftovers(yt: Any, directory: str = "//home/eosink") -> list[str]:
    """Staging tables visible outside any transaction (there must be none)."""
    if not yt.exists(directory):
        return []
    return [str(n) for n in yt.list(directory) if any(s in str(n) for s in STAGING_SUFFIXES)]


def open_transactions(yt: Any) -> list[str]:
    """Master transactions still alive on the cluster, nested ones included (YT lists every
    one of them under //sys/transactions; committed, aborted and expired ones are gone)."""
    return sorted(str(tx) for tx in yt.list("//sys/transactions"))


def keepers(main_tx: str = "") -> list[int]:
    """Pids of the detached batch keepers running on this machine (of ``main_tx``)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            if b"eosink_yt_static.keeper" in args and (not main_tx or main_tx.encode() in args):
                found.append(int(pid))
        except OSError:
            pass
    return found
