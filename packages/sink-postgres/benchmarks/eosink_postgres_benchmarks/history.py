"""The postgres sink's per-batch cost as the target's history grows (no Spark).

``--batches`` small batches (``--rows`` rows in ``--partitions`` partitions each) of one writer
go through the real protocol (executors in this process) into a table of a PostgreSQL server
of its own (``eosink.testing.postgres``). Per batch it measures the driver's exactly-once time
(``is_committed`` + ``init`` + ``commit``) and the whole batch; it prints the medians of the
``--window`` batches that end at batch 10, 1k, 10k, 100k (those within ``--batches``) and the
last, and the ratio of the last to the first: a flat history is a ratio near 1. The load average
is printed at the start and the end (the machine's load moves the figures, not the history).

    ./pants run packages/sink-postgres/benchmarks:history -- --batches 10000
    python -m eosink_postgres_benchmarks.history --batches 1000
    python -m eosink_postgres_benchmarks.history --at 10,1000,10000,100000
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from typing import Any

import pyarrow as pa
import structlog

import eosink
from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.hook_timer import HookTimer
from eosink.testing.local import LocalRunner
from eosink.testing.postgres import postgres_server_running


def partitions_of(batch_id: int, partitions: int, rows: int) -> list[list[pa.RecordBatch]]:
    out = []
    for p in range(partitions):
        ids = [batch_id * 1_000_000 + p * 10_000 + i for i in range(rows)]
        names = [str(i) for i in ids]
        out.append([pa.record_batch({"id": pa.array(ids, pa.int64()), "name": names})])
    return out


def one_batch(sink: Any, batch_id: int, rows: int, partitions: int) -> tuple[float, float]:
    """One batch of the writer: the driver's seconds in its exactly-once hooks, and the whole
    batch's."""
    timer = HookTimer()  # is_committed + init + commit
    ctx = BatchContext(sink="postgres", writer_id="bench", batch_id=batch_id)
    data = partitions_of(batch_id, partitions, rows)
    began = time.perf_counter()
    outcome = run_batch(sink, ctx, data[0][0].schema, LocalRunner(data), plugins=[timer])
    whole = time.perf_counter() - began
    assert outcome.status == "committed", outcome
    return timer.total(), whole


def run_batches(sink: Any, first: int, count: int, rows: int, partitions: int) -> list[float]:
    """Batches ``first`` .. ``first + count - 1`` of one writer; the driver's seconds of each."""
    return [one_batch(sink, b, rows, partitions)[0] for b in range(first, first + count)]


def synthesize_history(url: str, at: int, rows: int = 100, partitions: int = 2) -> Any:
    """A sink into a fresh table whose writer has a history of ``at`` batches (``at`` >= 1);
    the next batch is ``at``.

    Batch 0 runs for real (the meta schema, the writer's progress row, one proof), then the
    proofs of batches 1 .. ``at - 1`` are copied from it in SQL and the progress row moved to
    ``at - 1``: the proof and progress tables then hold what ``at`` real batches leave there
    (the target's rows do not matter to an append's cost). ``main``'s real run shows the same
    to 10k batches, the catalog churn of the staging tables included."""
    import psycopg

    table = f"public.history_{at}"
    sink = eosink.sink("postgres", url=url, table=table)
    run_batches(sink, 0, 1, rows, partitions)
    with psycopg.connect(url, autocommit=True) as conn:
        (target_id,) = conn.execute(
            "SELECT target_id FROM eosink.targets WHERE table_oid = %s::regclass "
            "AND replaced_at IS NULL",
            (table,),
        ).fetchone()
        conn.execute(
            "INSERT INTO eosink.proofs SELECT target_id, writer_id, g, attempt, target, mode, "
            "rows, fingerprint, query_id, checkpoint, committed_at, "
            "jsonb_set(proof, '{batch_id}', to_jsonb(g)) FROM eosink.proofs, "
            "generate_series(1, %s) g WHERE target_id = %s AND batch_id = 0",
            (at - 1, target_id),
        )
        conn.execute(
            "UPDATE eosink.progress SET last_batch = %s WHERE target_id = %s",
            (at - 1, target_id),
        )
        conn.execute("VACUUM ANALYZE eosink.proofs")
    return sink


def measure_at(
    url: str, sizes: list[int], batches: int, rounds: int = 1, rows: int = 100, partitions: int = 2
) -> dict[int, list[float]]:
    """The driver's seconds per batch after a history of each of ``sizes`` batches:
    ``rounds`` interleaved rounds of ``batches`` batches at every size (so that the machine's
    load falls on every size alike)."""
    sinks = {size: synthesize_history(url, size, rows, partitions) for size in sizes}
    spent: dict[int, list[float]] = {size: [] for size in sizes}
    for round_ in range(rounds):
        for size in sizes:
            first = size + round_ * batches
            spent[size] += run_batches(sinks[size], first, batches, rows, partitions)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument(
        "--at",
        default="",
        help="instead of one long run: synthesized histories of these lengths (e.g. "
        "10,1000,10000,100000), measured in interleaved rounds",
    )
    parser.add_argument("--rounds", type=int, default=5, help="with --at")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    if args.at:
        interleaved(args, [int(n) for n in args.at.split(",")])
        return
    load_before = os.getloadavg()
    with postgres_server_running() as server:
        sink = eosink.sink("postgres", url=server.url(), table="public.history")
        driver, whole = [], []
        for batch_id in range(args.batches):
            spent, took = one_batch(sink, batch_id, args.rows, args.partitions)
            driver.append(spent)
            whole.append(took)
            if (batch_id + 1) % 1_000 == 0:
                recent = statistics.median(driver[-100:]) * 1000
                print(f"batch {batch_id + 1}: driver {recent:.1f} ms", file=sys.stderr)
    report(args, driver, whole, load_before, os.getloadavg())


def interleaved(args: argparse.Namespace, sizes: list[int]) -> None:
    load_before = os.getloadavg()
    with postgres_server_running() as server:
        spent = measure_at(
            server.url(), sizes, args.window, args.rounds, args.rows, args.partitions
        )
    print(
        f"\nsynthesized histories, {args.rounds} interleaved rounds of {args.window} batches "
        f"x {args.partitions} x {args.rows} rows at each"
    )
    print(f"load average (1, 5, 15 min): before {load_before}, after {os.getloadavg()}")
    print(f"{'at batch':>10} {'driver ms (median)':>20} {'best':>8} {'vs first':>9}")
    first = statistics.median(spent[sizes[0]])
    for size in sizes:
        median = statistics.median(spent[size])
        print(
            f"{size:>10,} {median * 1000:20.1f} {min(spent[size]) * 1000:8.1f} "
            f"{median / first:8.2f}x"
        )


def report(
    args: argparse.Namespace,
    driver: list[float],
    whole: list[float],
    load_before: tuple[float, float, float],
    load_after: tuple[float, float, float],
) -> None:
    marks = [n for n in (10, 1_000, 10_000, 100_000) if n < args.batches] + [args.batches]
    print(f"\n{args.batches} batches x {args.partitions} x {args.rows} rows, one writer")
    print(f"load average (1, 5, 15 min): before {load_before}, after {load_after}")
    print(f"{'at batch':>10} {'window':>8} {'driver ms (median)':>20} {'whole batch ms':>16}")
    medians = []
    for n in marks:
        w = min(args.window, n)
        d = statistics.median(driver[n - w : n])
        medians.append(d)
        t = statistics.median(whole[n - w : n])
        print(f"{n:>10,} {w:>8} {d * 1000:20.1f} {t * 1000:16.1f}")
    print(f"last / first (driver): {medians[-1] / medians[0]:.2f}x")


if __name__ == "__main__":
    main()
