"""Independent checks of what the emulated cluster holds."""

from __future__ import annotations

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
