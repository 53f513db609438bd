"""Per-batch driver cost of the delta sink as the table's history grows (no Spark).

For each size N: a table whose writer is at batch N, with N commits and N data files
(synthesized in bulk by ``delta_history``, a checkpoint where delta-rs writes one), then
``--batches`` two-row batches of that writer through the core's ``run_batch`` and the kit's
``LocalRunner``. A batch's cost is the time of its ``is_committed`` + ``init`` + ``commit``
hooks (the driver's exactly-once work; the writes are not counted), and the table prints the
median per size, twice:

* ``kept``: the sink as it is, one snapshot kept between batches and brought up to date;
* ``reopened``: the same sink with the snapshot dropped before every hook, i.e. a fresh
  ``DeltaTable`` in each of the three hooks (what the sink did before it kept one).

The ratio column compares each size with the first one. The first batch of ``kept`` opens the
table (one full load per driver) and is shown apart, not in the median.

    python packages/sink-delta/tests/bench_history.py                       # 10 .. 100k
    python packages/sink-delta/tests/bench_history.py --sizes 10,1000 --batches 10
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Generator
from typing import Any

import structlog
from delta_helpers import rows, run
from delta_history import synthesize
from eosink_delta import snapshot
from eosink_delta.sink import DeltaSink

from eosink import hookimpl


class HookTimer:
    """Sums the driver hooks' time per batch; drops the kept snapshot first if ``reopen``."""

    def __init__(self, uri: str, reopen: bool) -> None:
        self.uri, self.reopen, self.total = uri, reopen, 0.0

    def _timed(self) -> Generator[None, Any, Any]:
        if self.reopen:
            snapshot.forget(self.uri)
        started = time.perf_counter()
        try:
            return (yield)
        finally:
            self.total += time.perf_counter() - started

    @hookimpl(wrapper=True)
    def is_committed(self) -> Generator[None, Any, Any]:
        return (yield from self._timed())

    @hookimpl(wrapper=True)
    def init(self) -> Generator[None, Any, Any]:
        return (yield from self._timed())

    @hookimpl(wrapper=True)
    def commit(self) -> Generator[None, Any, Any]:
        return (yield from self._timed())


def batch_costs(path: str, first: int, batches: int, *, reopen: bool) -> list[float]:
    """Milliseconds of driver hooks for each of ``batches`` batches from batch ``first``."""
    sink = DeltaSink(path=path)
    costs = []
    for batch in range(first, first + batches):
        timer = HookTimer(sink.uri, reopen)
        outcome = run(sink, batch, [rows(batch, 2)], plugins=(timer,))
        assert outcome.status == "committed", outcome
        costs.append(timer.total * 1000)
    return costs


def measure(folder: str, size: int, batches: int) -> dict[str, float]:
    """One size's figures; a table left in ``folder`` by an earlier run is used again."""
    from deltalake import DeltaTable

    path = os.path.join(folder, f"table-{size}")
    started = time.monotonic()
    if not os.path.exists(path):
        synthesize(path, commits=size)
    built = time.monotonic() - started
    snapshot.forget(path)
    batch = DeltaTable(path).transaction_version("w") + 1
    first = batch_costs(path, batch, 1, reopen=False)[0]
    kept = batch_costs(path, batch + 1, batches, reopen=False)
    reopened = batch_costs(path, batch + 1 + batches, batches, reopen=True)
    snapshot.forget(path)
    return {
        "size": size,
        "built_s": built,
        "first": first,
        "kept": statistics.median(kept),
        "kept_max": max(kept),
        "reopened": statistics.median(reopened),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000,100000")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument(
        "--dir", default=None, help="where the tables go and stay for the next run (default: a new temp dir)"
    )
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    folder = args.dir or tempfile.mkdtemp(prefix="eosink-delta-history-")
    results = [measure(folder, int(s), args.batches) for s in args.sizes.split(",")]
    base = results[0]
    print(f"\nper-batch driver cost (is_committed + init + commit), median of {args.batches}")
    print("| batch (= commits = files) | kept, ms | ratio | max, ms | reopened, ms | ratio |"
          " first batch, ms |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['size']:,} | {r['kept']:.1f} | {r['kept'] / base['kept']:.2f}x "
            f"| {r['kept_max']:.1f} | {r['reopened']:.1f} "
            f"| {r['reopened'] / base['reopened']:.2f}x | {r['first']:.1f} |"
        )
    built = ", ".join(f"{r['size']:,}: {r['built_s']:.0f} s" for r in results)
    print(f"\nhistory synthesized in {built}")


if __name__ == "__main__":
    main()
