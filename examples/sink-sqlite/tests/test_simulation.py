"""The sqlite example passes the kit's generated histories, judged by plain SQL."""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from eosink_sqlite.sink import SqliteSink, read_rows

from eosink.testing.simulation import HistorySpec, SimTarget, SinkSimulation


class TestSqliteSimulation(SinkSimulation):
    # What SQLite keeps as it was given (dates and times come back as ISO text).
    simulation_types = ("int64", "int32", "float64", "bool", "string", "binary", "date", "timestamp")

    def simulation_target(self, spec: HistorySpec, env: Any) -> SimTarget:
        folder = Path(tempfile.mkdtemp(prefix="eosink-sqlite-sim-"))
        path = str(folder / "target.db")
        return SimTarget(
            sink=lambda: SqliteSink(path=path),
            read=lambda: read_rows(path),
            close=lambda: shutil.rmtree(folder, ignore_errors=True),
        )

    def simulation_row(self, spec: HistorySpec, row: dict[str, Any]) -> dict[str, Any]:
        """SQLite stores NaN as NULL, booleans as integers, dates and times as ISO text."""
        out = {}
        for name, value in row.items():
            if isinstance(value, float) and math.isnan(value):
                value = None
            elif hasattr(value, "isoformat"):
                value = value.isoformat()
            out[name] = value
        return out
