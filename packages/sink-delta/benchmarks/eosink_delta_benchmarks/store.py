"""Per-batch exactly-once overhead of the delta sink, local disk vs S3 (no Spark).

The same ``--batches`` two-row batches of one writer go through the core's ``run_batch`` and
the kit's ``LocalRunner`` into a table on local disk and into a table on the loopback S3 server
(``eosink.testing.s3``: moto in a child process, one mutating request at a time). A batch's
overhead is its ``is_committed`` + ``commit`` hooks (the driver's exactly-once work: the txn
check and the Delta commit; ``init`` and the writes are shown apart). The table prints medians
after the first batch (which opens the table and, on S3, probes the store), and the ratio of S3
to local disk.

    ./pants run packages/sink-delta/benchmarks:store
    ./pants run packages/sink-delta/benchmarks:store -- --batches 30
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile

import structlog
from delta_helpers import rows, run
from eosink_delta.sink import DeltaSink

from eosink.testing.hook_timer import EXACTLY_ONCE_HOOKS as HOOKS
from eosink.testing.hook_timer import HookTimer
from eosink.testing.s3 import s3_server


def costs(sink: DeltaSink, batches: int) -> list[dict[str, float]]:
    out = []
    for batch in range(batches):
        timer = HookTimer(HOOKS)
        assert run(sink, batch, [rows(batch, 2)], plugins=(timer,)).status == "committed"
        out.append({hook: seconds * 1000 for hook, seconds in timer.current.items()})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=21)
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    results = {}
    with tempfile.TemporaryDirectory(prefix="eosink-delta-store-") as folder:
        results["local disk"] = costs(DeltaSink(path=f"{folder}/table"), args.batches)
    with s3_server() as endpoint:
        bucket = endpoint.create_bucket()
        sink = DeltaSink(
            path=f"s3://{bucket}/table", storage_options=endpoint.object_store_options()
        )
        results["S3 (moto, loopback)"] = costs(sink, args.batches)
    print(
        f"\ndelta sink, per-batch driver cost, ms, median of batches 2..{args.batches} "
        "(two-row batches, one writer)\n"
    )
    print(
        "| store | is_committed + commit | vs local | is_committed | commit | init "
        "| first batch (all three) |"
    )
    print("|---|---|---|---|---|---|---|")
    base = None
    for name, per_batch in results.items():
        steady = per_batch[1:]
        med = {h: statistics.median(b[h] for b in steady) for h in HOOKS}
        overhead = statistics.median(b["is_committed"] + b["commit"] for b in steady)
        base = base or overhead
        first = sum(per_batch[0].values())
        print(
            f"| {name} | {overhead:.1f} | {overhead / base:.1f}x | {med['is_committed']:.1f} "
            f"| {med['commit']:.1f} | {med['init']:.1f} | {first:.1f} |"
        )


if __name__ == "__main__":
    main()
