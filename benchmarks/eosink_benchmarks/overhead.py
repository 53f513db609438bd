"""Section 2: the exactly-once overhead of a batch, ``is_committed`` + ``commit``, per sink.

Every sink runs the same small batches (2 partitions x 1,000 rows) through the core's
``run_batch`` on the driver, as every front door does; a plugin times the two hooks that make
a batch exactly-once (the check before and the publication after the writes). The first batch
of each sink is its warm-up. The YT sinks run against the in-process YT proxy emulator, so their
figures are the emulator's, not a cluster's.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import attrs
import pyarrow as pa

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.hook_timer import HookTimer
from eosink.testing.local import LocalRunner
from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, verdict
from eosink_benchmarks.timing import percentile

ROWS = 1_000
PARTITIONS = 2
LIMIT_MS = 20.0


@attrs.frozen
class Overhead:
    sink: str
    ms: tuple[float, ...]

    @property
    def median(self) -> float:
        return percentile(self.ms, 50)

    @property
    def p95(self) -> float:
        return percentile(self.ms, 95)


def plain_rows(batch: int) -> list[list[pa.RecordBatch]]:
    first = batch * ROWS * PARTITIONS
    return [
        [
            pa.record_batch(
                {
                    "id": pa.array(range(start, start + ROWS), pa.int64()),
                    "name": pa.array([f"name-{i % 100}" for i in range(ROWS)]),
                }
            )
        ]
        for start in range(first, first + ROWS * PARTITIONS, ROWS)
    ]


def sinks(work: str, emu: Any) -> dict[str, tuple[Any, Callable[[int], list]]]:
    """name -> (sink, batch number -> partitions) of every sink, one instance per query."""
    from eosink_yt_dynamic_benchmarks import writes as dynamic_writes
    from eosink_yt_static_benchmarks import writes as static_writes
    from eosink_delta.sink import DeltaSink
    from eosink_files.sink import FilesSink
    from eosink_sqlite.sink import SqliteSink
    from eosink_yt_dynamic import YtDynamicSink, create_output_table

    def dynamic_rows(batch: int) -> list:
        return dynamic_writes.partitions(ROWS * PARTITIONS, PARTITIONS, batch)

    create_output_table(emu.client(), "//overhead/dynamic", dynamic_rows(0)[0][0].schema)
    static = static_writes.Bench(emu).sink("//overhead/static")
    return {
        "eosink-files": (FilesSink(path=os.path.join(work, "files")), plain_rows),
        "eosink-delta": (DeltaSink(path=os.path.join(work, "delta")), plain_rows),
        "eosink-sqlite (example)": (SqliteSink(path=os.path.join(work, "out.db")), plain_rows),
        "eosink-yt-static (emulator)": (
            static,
            lambda batch: static_writes.partitions(
                batch * ROWS * PARTITIONS, ROWS * PARTITIONS, PARTITIONS
            ),
        ),
        "eosink-yt-dynamic (emulator)": (
            YtDynamicSink(
                proxy=emu.url,
                path="//overhead/dynamic",
                proxy_discovery=False,
                client_config=emu.client_config(**dynamic_writes.PATIENT),
            ),
            dynamic_rows,
        ),
    }


def measure(name: str, sink: Any, data: Callable[[int], list], batches: int) -> Overhead:
    """``is_committed`` + ``commit`` of ``batches`` batches of ``sink`` after one warm-up batch,
    ``data(batch)`` the partitions of each."""
    timer, ms = HookTimer(("is_committed", "commit")), []
    for batch in range(batches + 1):
        parts = data(batch)
        ctx = BatchContext(sink.name, "bench", batch, query_id="q")
        outcome = run_batch(sink, ctx, parts[0][0].schema, LocalRunner(parts), plugins=[timer])
        assert outcome.status == "committed", (name, outcome)
        if batch:
            ms.append(timer.total() * 1000)
    return Overhead(name, tuple(ms))


def run(work: str, batches: int, progress: Progress) -> list[Overhead]:
    """``batches`` measured batches per sink after one warm-up batch."""
    from eosink_yt_emulator.server import YtEmulator

    emu = YtEmulator().start()
    try:
        emu.client().create("map_node", "//overhead", recursive=True, ignore_existing=True)
        results = []
        measured = sinks(work, emu)
        logging.getLogger("Yt").setLevel(logging.WARNING)  # after the clients set it up
        for name, (sink, data) in measured.items():
            progress.step(f"{name}: 1 warm-up + {batches} batches")
            results.append(measure(name, sink, data, batches))
    finally:
        emu.stop()
    return results


def table(results: list[Overhead], batches: int) -> Table:
    return Table(
        f"Exactly-once overhead per batch (is_committed + commit), ms, {batches} batches",
        ("sink", "median ms", "p95 ms", f"median <= {LIMIT_MS:.0f} ms"),
        tuple(
            (r.sink, f"{r.median:.1f}", f"{r.p95:.1f}", verdict(r.median <= LIMIT_MS))
            for r in results
        ),
        (
            f"{PARTITIONS} partitions x {ROWS:,} rows a batch through the core's run_batch on the "
            "driver, one sink instance per query; the first batch is the warm-up. The YT sinks "
            "run against the in-process emulator (its figures, not a cluster's).",
        ),
    )


def targets(results: list[Overhead]) -> list[Target]:
    return [
        Target(
            "2. overhead",
            r.sink,
            f"median <= {LIMIT_MS:.0f} ms",
            f"{r.median:.1f} ms",
            r.median <= LIMIT_MS,
        )
        for r in results
    ]
