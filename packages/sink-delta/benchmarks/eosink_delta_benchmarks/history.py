"""Per-batch driver cost of the delta sink as the table's history grows (no Spark).

For each size N: a table whose writer is at batch N, with N commits and N data files
(synthesized in bulk by ``delta_history``, with a checkpoint where delta-rs writes one), then
``--batches`` two-row batches of that writer through the core's ``run_batch`` and the kit's
``LocalRunner``. A batch's cost is the time of its ``is_committed`` + ``init`` + ``commit``
hooks (the driver's exactly-once work; the writes are not counted); the tables print the
median per size, and the ratio to the first size:

* ``kept``: the sink as it is, its view of the log kept between batches and brought up to date;
* ``reopened``: the same sink with what it keeps dropped before every hook, i.e. the log view
  opened from the last checkpoint in each of the three hooks.

Twice: with every commit file still in ``_delta_log`` (a table whose whole history is younger
than ``delta.logRetentionDuration``), and after that history expired and was cleaned up (what
a stream older than the retention has). The last column is, for comparison, one delta-rs
``update_incremental`` with nothing new, i.e. one listing of ``_delta_log``, which the sink's
batches no longer do. The first
batch after start opens the table (one full load per driver) and is shown apart.

    ./pants run packages/sink-delta/benchmarks:history -- --dir /tmp/h       # 10 .. 100k
    ./pants run packages/sink-delta/benchmarks:history -- --sizes 10,1000 --batches 10
    ./pants run packages/sink-delta/benchmarks:history
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from typing import Any

import structlog
from delta_helpers import rows, run
from delta_history import age_log, copy_table, synthesize
from eosink_delta import snapshot
from eosink_delta.sink import DeltaSink

from eosink.testing.hook_timer import HookTimer


def batch_costs(
    path: str, first: int, batches: int, *, reopen: bool, cpu: list[float] | None = None
) -> list[float]:
    """Milliseconds of driver hooks for each of ``batches`` batches from batch ``first``; the
    CPU milliseconds this process spent in them go to ``cpu`` (on a shared machine the wall
    time also measures the neighbours' load, the CPU time much less)."""
    sink = DeltaSink(path=path)
    costs = []
    for batch in range(first, first + batches):
        # reopen: what the sink keeps is dropped before every hook, outside its time
        forget = (lambda: snapshot.forget(sink.uri)) if reopen else None
        timer = HookTimer(("is_committed", "init", "commit"), before=forget, cpu=True)
        outcome = run(sink, batch, [rows(batch, 2)], plugins=(timer,))
        assert outcome.status == "committed", outcome
        costs.append(timer.total() * 1000)
        if cpu is not None:
            cpu.append(timer.cpu_total() * 1000)
    return costs


def update_cost(path: str) -> float:
    """Milliseconds of delta-rs' ``update_incremental`` when nothing is new (a log listing)."""
    from deltalake import DeltaTable

    table, costs = DeltaTable(path), []
    for _ in range(7):
        started = time.perf_counter()
        table.update_incremental()
        costs.append((time.perf_counter() - started) * 1000)
    return statistics.median(costs)


def measure(folder: str, size: int, batches: int) -> dict[str, Any]:
    """One size's figures, on a copy of the synthesized history (kept in ``folder``)."""
    from deltalake import DeltaTable

    history = os.path.join(folder, f"history-{size}")
    started = time.monotonic()
    if not os.path.exists(history):
        synthesize(history, commits=size)
    built = time.monotonic() - started
    path = os.path.join(folder, f"run-{size}")
    shutil.rmtree(path, ignore_errors=True)
    copy_table(history, path)
    batch = size
    out: dict[str, Any] = {"size": size, "built_s": built}
    for variant in ("retained", "cleaned"):
        if variant == "cleaned":  # the history is older than delta.logRetentionDuration
            age_log(path, 31)
            DeltaTable(path).cleanup_metadata()  # what eosink's commit runs with a checkpoint
        snapshot.forget(path)
        out[f"{variant}_first"] = batch_costs(path, batch, 1, reopen=False)[0]
        cpu: list[float] = []
        kept = batch_costs(path, batch + 1, batches, reopen=False, cpu=cpu)
        reopened = batch_costs(path, batch + 1 + batches, batches, reopen=True)
        batch += 1 + 2 * batches
        out[f"{variant}_kept"] = statistics.median(kept)
        out[f"{variant}_max"] = max(kept)
        out[f"{variant}_cpu"] = statistics.median(cpu)
        out[f"{variant}_reopened"] = statistics.median(reopened)
        out[f"{variant}_log"] = len(os.listdir(os.path.join(path, "_delta_log")))
        out[f"{variant}_update"] = update_cost(path)
    snapshot.forget(path)
    shutil.rmtree(path)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000,100000")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument(
        "--dir",
        default=None,
        help="where the tables go and stay for the next run (default: a new temp dir)",
    )
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    folder = args.dir or tempfile.mkdtemp(prefix="eosink-delta-history-")
    results = [measure(folder, int(s), args.batches) for s in args.sizes.split(",")]
    base = results[0]
    print(f"\nper-batch driver cost (is_committed + init + commit), ms, median of {args.batches}")
    for variant, title in (
        ("retained", "every commit still in the log (all younger than delta.logRetentionDuration)"),
        ("cleaned", "history older than delta.logRetentionDuration, cleaned at a checkpoint"),
    ):
        print(f"\n{title}\n")
        print(
            "| batch (= commits = files) | log files | kept | ratio | kept, CPU | ratio | max "
            "| reopened | ratio | first batch | delta-rs update, nothing new |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in results:
            kept, reopened = r[f"{variant}_kept"], r[f"{variant}_reopened"]
            cpu = r[f"{variant}_cpu"]
            print(
                f"| {r['size']:,} | {r[f'{variant}_log']:,} | {kept:.1f} "
                f"| {kept / base[f'{variant}_kept']:.2f}x "
                f"| {cpu:.2f} | {cpu / base[f'{variant}_cpu']:.2f}x | {r[f'{variant}_max']:.1f} "
                f"| {reopened:.1f} | {reopened / base[f'{variant}_reopened']:.2f}x "
                f"| {r[f'{variant}_first']:.1f} | {r[f'{variant}_update']:.1f} |"
            )
    built = ", ".join(f"{r['size']:,}: {r['built_s']:.0f} s" for r in results)
    print(f"\nhistory synthesized in {built} (0 s: reused from --dir)")


if __name__ == "__main__":
    main()
