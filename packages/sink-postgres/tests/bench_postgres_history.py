"""The postgres sink's per-batch cost as the target's history grows (no Spark).

``--batches`` small batches (``--rows`` rows in ``--partitions`` partitions each) of one writer
go through the real protocol (executors in this process) into a table of a PostgreSQL server
of its own (``eosink.testing.postgres``). Per batch it measures the driver's exactly-once time
(``is_committed`` + ``init`` + ``commit``) and the whole batch; it prints the medians of the
first and the last ``--window`` batches and their ratio: a flat history is a ratio near 1.

    ./pants run packages/sink-postgres/tests:bench-history -- --batches 10000
    python packages/sink-postgres/tests/bench_postgres_history.py --batches 1000
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

import pyarrow as pa
import structlog

import eosink
from eosink.plugin import BatchContext, hookimpl
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner
from eosink.testing.postgres import postgres_server_running


class DriverTimer:
    """A cross-cutting plugin: the driver's time in the exactly-once hooks of one batch."""

    def __init__(self) -> None:
        self.spent = 0.0

    def _timed(self):  # noqa: ANN202
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            self.spent += time.perf_counter() - started

    @hookimpl(wrapper=True)
    def is_committed(self):  # noqa: ANN201
        return (yield from self._timed())

    @hookimpl(wrapper=True)
    def init(self):  # noqa: ANN201
        return (yield from self._timed())

    @hookimpl(wrapper=True)
    def commit(self):  # noqa: ANN201
        return (yield from self._timed())


def partitions_of(batch_id: int, partitions: int, rows: int) -> list[list[pa.RecordBatch]]:
    out = []
    for p in range(partitions):
        ids = [batch_id * 1_000_000 + p * 10_000 + i for i in range(rows)]
        names = [str(i) for i in ids]
        out.append([pa.record_batch({"id": pa.array(ids, pa.int64()), "name": names})])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--window", type=int, default=100)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    with postgres_server_running() as server:
        sink = eosink.sink("postgres", url=server.url(), table="public.history")
        driver, whole = [], []
        for batch_id in range(args.batches):
            timer = DriverTimer()
            ctx = BatchContext(sink="postgres", writer_id="bench", batch_id=batch_id)
            data = partitions_of(batch_id, args.partitions, args.rows)
            began = time.perf_counter()
            run_batch(sink, ctx, data[0][0].schema, LocalRunner(data), plugins=[timer])
            whole.append(time.perf_counter() - began)
            driver.append(timer.spent)
    w = min(args.window, max(1, args.batches // 2))
    first, last = statistics.median(driver[:w]), statistics.median(driver[-w:])
    print(f"\n{args.batches} batches x {args.partitions} x {args.rows} rows, one writer")
    print(f"{'batches':>16} {'driver ms (median)':>20} {'whole batch ms':>16}")
    for label, spent, total in (
        (f"first {w}", first, statistics.median(whole[:w])),
        (f"last {w}", last, statistics.median(whole[-w:])),
    ):
        print(f"{label:>16} {spent * 1000:20.1f} {total * 1000:16.1f}")
    print(f"last / first (driver): {last / first:.2f}x")


if __name__ == "__main__":
    main()
