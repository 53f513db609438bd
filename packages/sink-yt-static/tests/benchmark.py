"""Benchmark: the yt-static sink against one plain ``write_table`` of the same rows.

Runs against an in-process YT proxy emulator, so the figures compare the sink's overhead
(transaction tree, staging, sort/merge/move, proof) with the cheapest possible write, not the
speed of a real cluster::

    source /work/dev-env.sh   # or any environment with the packages installed
    python packages/sink-yt-static/tests/benchmark.py --rows 200000 --partitions 4
"""

from __future__ import annotations

import argparse
import logging
import pickle
import threading
import time
from collections import defaultdict

import pyarrow as pa
import structlog

from eosink import BatchContext, run_batch
from eosink.logs import PhaseLogger
from eosink_yt_common import yt_rows
from eosink_yt_emulator.server import YtEmulator
from eosink_yt_static.sink import YtStaticSink


def partitions(batch_id: int, rows: int, parts: int) -> list[list[pa.RecordBatch]]:
    per = rows // parts
    out = []
    for p in range(parts):
        ids = [batch_id * 10_000_000 + p * per + i for i in range(per)][::-1]
        out.append(
            [
                pa.record_batch(
                    {
                        "id": pa.array(ids, pa.int64()),
                        "name": pa.array([f"row-{i}" for i in ids]),
                        "amount": pa.array([i / 4 for i in ids], pa.float64()),
                    }
                )
            ]
        )
    return out


class ParallelRunner:
    """Every partition in its own thread, like executors (each task pickled)."""

    def __init__(self, parts):
        self.parts = parts

    def __call__(self, task):
        results = [None] * len(self.parts)

        def one(pid):
            shipped = pickle.loads(pickle.dumps(task))
            results[pid] = shipped(pid, 0, iter(self.parts[pid]))

        threads = [threading.Thread(target=one, args=(p,)) for p in range(len(self.parts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batches", type=int, default=2)
    args = parser.parse_args(argv)
    logging.getLogger("Yt").setLevel(logging.WARNING)
    events: dict[str, list[dict]] = defaultdict(list)

    def keep(_, name, event):
        events[event.get("event", name)].append(dict(event))
        raise structlog.DropEvent

    saved = structlog.get_config()
    structlog.configure(processors=[keep])
    emu = YtEmulator().start()
    try:
        client = emu.client()
        data = partitions(0, args.rows, args.partitions)
        client.create("map_node", "//bench")
        started = time.monotonic()
        rows = [r for part in data for b in part for r in yt_rows(b)]
        client.write_table("//bench/plain", rows)
        plain = time.monotonic() - started
        print(
            f"plain write_table: {args.rows} rows in {plain:.2f} s "
            f"= {args.rows / plain:,.0f} rows/s"
        )

        for label, keys in (("unsorted", ()), ("keyed by id", ("id",))):
            sink = YtStaticSink(
                proxy=emu.url, proxy_discovery=False, path=f"//bench/{label[:4]}", key_columns=keys
            )
            for batch_id in range(args.batches):
                events.clear()
                parts = partitions(batch_id, args.rows, args.partitions)
                ctx = BatchContext(sink="yt-static", writer_id="bench", batch_id=batch_id)
                started = time.monotonic()
                outcome = run_batch(
                    sink, ctx, parts[0][0].schema, ParallelRunner(parts), plugins=[PhaseLogger()]
                )
                took = time.monotonic() - started
                phases = {
                    e["event"].split(".")[1]: e["duration_ms"]
                    for k in ("phase.is_committed", "phase.init", "phase.write", "phase.commit")
                    for e in events.get(k, [])[-1:]
                }
                phases["write (executors)"] = round(took * 1000 - sum(phases.values()), 1)
                stages = {
                    k: v
                    for k, v in (events["yt_static.commit_stages"] or [{}])[-1].items()
                    if k.endswith("_ms")
                }
                held = client.get(f"//bench/{label[:4]}/@row_count")
                print(
                    f"sink, {label}, batch {batch_id} "
                    f"({'append: merge' if batch_id else 'new table'}): "
                    f"{outcome.rows} rows in {took:.2f} s = {outcome.rows / took:,.0f} rows/s "
                    f"({took / plain:.1f}x plain; table holds {held})\n"
                    f"    phases ms: {phases}\n    commit stages ms: {stages}"
                )
    finally:
        emu.stop()
        structlog.configure(**saved)


if __name__ == "__main__":
    main()
