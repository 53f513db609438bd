"""The machine a report was measured on: its header."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess


def describe(cores: int) -> list[str]:
    """Lines of the report's header: date, commit, CPUs, load, Python, Spark, OS."""
    import pyspark

    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return [
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- commit: {commit()}",
        f"- CPU cores: {os.cpu_count()} ({platform.processor() or platform.machine()}); "
        f"Spark runs on local[{cores}]",
        f"- load average at the start (1, 5, 15 min): {load}",
        f"- Python {platform.python_version()}, Spark {pyspark.__version__}, "
        f"{platform.system()} {platform.release()}",
    ]


def commit() -> str:
    """The commit measured, so that a report names the code it is of: ``git describe`` of the
    working tree (``-dirty`` when it had uncommitted changes), or ``unknown`` outside a
    checkout."""
    try:
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return described.stdout.strip() or "unknown"
