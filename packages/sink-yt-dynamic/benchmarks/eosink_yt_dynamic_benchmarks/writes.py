"""Benchmark: rows/s of the sink vs a bare ``insert_rows`` loop over the same rows, on the emulator.

    ./pants run packages/sink-yt-dynamic/benchmarks:writes -- [rows] [partitions] [repeat]

Defaults: 1,000,000 rows in 20 partitions, best of 3.

Both sides start from the same Arrow batches and convert them with ``yt_rows``; the bare loop
then calls ``insert_rows`` once per chunk of ``rows_per_transaction`` rows (no transaction, no
checks), the sink runs the whole protocol (is_committed, init, write per partition with tablet
transactions, commit of the proof) with the duplicate check off, then on. Partition ``p`` holds
the rows of source tablet ``p`` in row order, as read from a queue; the last variant deals the
same rows to the partitions round-robin (as ``repartition(n)`` does), so that every chunk is
thousands of short runs spread over every tablet: the check's unfavourable case. Runs are
interleaved and the best of ``repeat`` is kept per variant, to damp the noise of a shared
machine. The emulator serves from a thread of the benchmark's own process, so the process's CPU
time counts the client's and the emulator's work of each variant; it is printed next to the wall
time because it barely moves when other programs share the cores. Request timeouts are long on
both sides: a client retry of a 50,000-row insert that took long on a loaded machine would
measure the retry, not the sink. Prints a table.
"""

from __future__ import annotations

import sys
import time

import pyarrow as pa

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing import LocalRunner
from eosink_yt_common import yt_rows
from eosink_yt_dynamic import YtDynamicSink, create_output_table
from eosink_yt_emulator.server import YtEmulator

CHUNK = 50_000
#: Client settings of both sides (see the docstring).
PATIENT = {"proxy": {"request_timeout": 600_000, "heavy_request_timeout": 600_000}}


def partitions(total: int, parts: int, batch: int) -> list[list[pa.RecordBatch]]:
    per = total // parts
    out = []
    for p in range(parts):
        start = batch * per
        out.append(
            [
                pa.record_batch(
                    {
                        "tablet_index": pa.array([p] * per, pa.int64()),
                        "row_index": pa.array(range(start, start + per), pa.int64()),
                        "id": pa.array(
                            range(p * 10**9 + start, p * 10**9 + start + per), pa.int64()
                        ),
                        "name": pa.array([f"name-{i % 1000}" for i in range(per)]),
                        "amount": pa.array([i / 4 for i in range(per)], pa.float64()),
                    }
                )
            ]
        )
    return out


def dealt(parts: list[list[pa.RecordBatch]]) -> list[list[pa.RecordBatch]]:
    """The same rows dealt to the partitions round-robin."""
    rows = pa.Table.from_batches([b for p in parts for b in p])
    n = len(parts)
    return [
        [rows.take(pa.array(range(i, rows.num_rows, n))).combine_chunks().to_batches()[0]]
        for i in range(n)
    ]


def bare(client, path, parts) -> None:
    for batches in parts:
        for batch in batches:
            table = pa.Table.from_batches([batch])
            for offset in range(0, table.num_rows, CHUNK):
                client.insert_rows(path, yt_rows(table.slice(offset, CHUNK)))


def sink_run(emu, path, parts, batch, check: bool, writer: str = "bench") -> None:
    sink = YtDynamicSink(
        proxy=emu.url,
        path=path,
        proxy_discovery=False,
        client_config=emu.client_config(**PATIENT),
        check_duplicates=check,
    )
    ctx = BatchContext(sink=sink.name, writer_id=writer, batch_id=batch)
    outcome = run_batch(sink, ctx, parts[0][0].schema, LocalRunner(parts))
    assert outcome.status == "committed", outcome


VARIANTS = {  # name -> (label, duplicate check, rows dealt round-robin)
    "bare": ("bare `insert_rows` loop", None, False),
    "sink": ("sink, `check_duplicates=false`", False, False),
    "checked": ("sink, duplicate check on", True, False),
    "dealt": ("sink, check on, rows dealt round-robin", True, True),
}


def measure(
    total: int, parts_n: int, repeat: int, cpu: dict[str, list[float]] | None = None
) -> dict[str, list[float]]:
    """Seconds of each variant's runs (``repeat`` each, interleaved, after one warm-up each).

    ``cpu``, if given, receives the process CPU seconds of the same runs.
    """
    emu = YtEmulator().start()
    try:
        client = emu.client(**PATIENT)
        schema = partitions(parts_n, parts_n, 0)[0][0].schema
        for name in VARIANTS:
            create_output_table(client, f"//bench/{name}", schema)
        for name, (_, check, _) in VARIANTS.items():  # warm up each: aux tables, connections
            warm = partitions(parts_n * 10, parts_n, 10_000)
            if check is None:
                bare(client, f"//bench/{name}", warm)
            else:
                sink_run(emu, f"//bench/{name}", warm, 0, check, "warm-up")
        times: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for r in range(repeat):
            parts = partitions(total, parts_n, r)
            for name, (_, check, deal) in VARIANTS.items():
                data = dealt(parts) if deal else parts
                started, cpu_started = time.perf_counter(), time.process_time()
                if check is None:
                    bare(client, f"//bench/{name}", data)
                else:
                    sink_run(emu, f"//bench/{name}", data, r, check)
                times[name].append(time.perf_counter() - started)
                if cpu is not None:
                    cpu.setdefault(name, []).append(time.process_time() - cpu_started)
    finally:
        emu.stop()
    return times


def main() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    parts_n = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    cpu_times: dict[str, list[float]] = {}
    best = {name: min(times) for name, times in measure(total, parts_n, repeat, cpu_times).items()}
    cpu = {name: min(times) for name, times in cpu_times.items()}
    print(f"{total:,} rows in {parts_n} partitions, chunks of {CHUNK:,}, best of {repeat}:\n")
    print("| variant | rows/s | time | vs bare loop | CPU time | CPU vs bare loop |")
    print("|---|---|---|---|---|---|")
    for name, (label, _, _) in VARIANTS.items():
        versus = "" if name == "bare" else f"{100 * (best[name] / best['bare'] - 1):+.1f}%"
        cpu_versus = "" if name == "bare" else f"{100 * (cpu[name] / cpu['bare'] - 1):+.1f}%"
        print(
            f"| {label} | {total / best[name]:,.0f} | {best[name]:.1f} s | {versus} "
            f"| {cpu[name]:.1f} s | {cpu_versus} |"
        )
    check = 100 * (best["checked"] / best["sink"] - 1)
    check_cpu = 100 * (cpu["checked"] / cpu["sink"] - 1)
    print(
        f"\nthe duplicate check alone (check on vs off): {check:+.1f}% time, {check_cpu:+.1f}% CPU"
    )


if __name__ == "__main__":
    main()
