"""The machine a report was measured on: its header."""

from __future__ import annotations

import datetime
import os
import platform


def describe(cores: int) -> list[str]:
    """Lines of the report's header: date, CPUs, load, Python, Spark, Java, OS."""
    import pyspark

    load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return [
        f"- date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
        f"- CPU cores: {os.cpu_count()} ({platform.processor() or platform.machine()}); "
        f"Spark runs on local[{cores}]",
        f"- load average at the start (1, 5, 15 min): {load}",
        f"- Python {platform.python_version()}, Spark {pyspark.__version__}, "
        f"{platform.system()} {platform.release()}",
    ]
