"""Benchmarks of the yt-static sink against the YT proxy emulator.

Three tables, all against an in-process emulator (so they compare the sink's own work, not a
real cluster's speed):

1. the sink against one plain ``write_table`` of the same rows;
2. the commit of a fixed append (10k rows) into tables of growing size. The big tables are
   built with ``YtEmulator.add_generated_rows``: one chunk that holds its row count and a row
   function instead of rows, so a 10M-row table costs no memory; a commit that touched the
   table's rows would have to generate them and show up in the figures;
3. what spilling costs: the same partitions written as one request each (nothing spilled) and
   in several requests (all but the last spilled to local disk, for a retry).

::

    ./pants run packages/sink-yt-static/benchmarks:writes
    ./pants run packages/sink-yt-static/benchmarks:writes -- --sizes 10000,1000000,10000000
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import pickle
import statistics
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import structlog

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.logs import PhaseLogger
from eosink_yt_common import yt_rows, yt_schema
from eosink_yt_emulator.server import YtEmulator
from eosink_yt_static.sink import YtStaticSink

#: Rows per Arrow record batch, as Spark sends them (spark.sql.execution.arrow.maxRecordsPerBatch).
ARROW_BATCH = 10_000


def record_batch(ids: list[int]) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"row-{i}" for i in ids]),
            "amount": pa.array([i / 4 for i in ids], pa.float64()),
        }
    )


def partitions(first_id: int, rows: int, parts: int, descending: bool = True) -> list[list]:
    """``parts`` partitions of ``rows`` rows in all, each cut into Spark-sized record batches."""
    per = rows // parts
    out = []
    for p in range(parts):
        ids = [first_id + p * per + i for i in range(per)]
        if descending:
            ids.reverse()
        out.append(
            [record_batch(ids[i : i + ARROW_BATCH]) for i in range(0, len(ids), ARROW_BATCH)]
        )
    return out


def generated_row(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"row-{i}", "amount": i / 4}


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


class Bench:
    def __init__(self, emu: YtEmulator) -> None:
        self.emu = emu
        self.client = emu.client()
        self.events: dict[str, list[dict]] = defaultdict(list)

    def keep(self, _: Any, name: str, event: dict) -> Any:
        self.events[event.get("event", name)].append(dict(event))
        raise structlog.DropEvent

    def run(self, sink: YtStaticSink, batch_id: int, parts: list[list]) -> dict[str, Any]:
        """One batch; its phases in ms, the commit's stages and how it was published."""
        self.events.clear()
        ctx = BatchContext(sink="yt-static", writer_id="bench", batch_id=batch_id)
        started = time.monotonic()
        outcome = run_batch(
            sink, ctx, parts[0][0].schema, ParallelRunner(parts), plugins=[PhaseLogger()]
        )
        took = (time.monotonic() - started) * 1000
        phases = {
            k.split(".")[1]: self.events[k][-1]["duration_ms"]
            for k in ("phase.init", "phase.commit")
            if self.events.get(k)
        }
        stages = (self.events.get("yt_static.commit_stages") or [{}])[-1]
        written = self.events.get("yt_static.part_written") or []
        return {
            "rows": outcome.rows,
            "total_ms": took,
            "write_ms": took - sum(phases.values()),
            "spilled": sum(e.get("spilled_bytes", 0) for e in written),
            "way": stages.get("way"),
            **phases,
        }

    def sink(self, path: str, **options: Any) -> YtStaticSink:
        # The emulator runs operations at once: poll them often, so that the figures show the
        # sink's work rather than the client's default poll period.
        fast_polls = {"operation_tracker": {"poll_period": 50}}
        return YtStaticSink(
            proxy=self.emu.url,
            proxy_discovery=False,
            path=path,
            client_config=fast_polls,
            **options,
        )

    def table(self, path: str, rows: int, keys: tuple[str, ...]) -> None:
        schema = yt_schema(record_batch([0]).schema, keys)
        self.client.create("table", path, recursive=True, attributes={"schema": schema})
        self.emu.add_generated_rows(path, rows, generated_row)


def sink_against_plain(bench: Bench, rows: int, parts: int, batches: int) -> None:
    data = partitions(0, rows, parts)
    started = time.monotonic()
    bench.client.write_table("//bench/plain", [r for p in data for b in p for r in yt_rows(b)])
    plain = time.monotonic() - started
    print(f"\n1. sink vs one plain write_table ({rows} rows, {parts} partitions)")
    print(f"{'case':<34}{'rows/s':>12}{'x plain':>9}{'commit ms':>11}  published by")
    print(f"{'plain write_table':<34}{rows / plain:>12,.0f}{1.0:>9.1f}{'':>11}")
    for label, keys in (("unsorted", ()), ("keyed by id", ("id",))):
        sink = bench.sink(f"//bench/{label[:4]}", key_columns=keys)
        for batch_id in range(batches):
            r = bench.run(sink, batch_id, partitions(batch_id * 10_000_000, rows, parts))
            took = r["total_ms"] / 1000
            print(
                f"{label + f', batch {batch_id}':<34}{r['rows'] / took:>12,.0f}"
                f"{took / plain:>9.1f}{r['commit']:>11.0f}  {r['way']}"
            )


def append_costs(
    bench: Bench,
    append_rows: int,
    sizes: list[int],
    merge_sizes: list[int],
    parts: int,
    repeats: int,
) -> list[dict[str, Any]]:
    """Per table size: the commit ms of each batch, per kind (``None``: not run at that size)."""
    results = []
    for n, size in enumerate(sizes):
        row: dict[str, Any] = {"size": size}
        for kind, keys in (("unsorted", ()), ("after", ("id",)), ("overlap", ("id",))):
            if kind == "overlap" and size not in merge_sizes:
                row[kind] = None
                continue
            path = f"//bench/append_{kind}_{n}"
            bench.table(path, size, keys)
            took = []
            for batch_id in range(repeats):
                # keys after the table's last one, or (overlap) inside the table's key range
                start = size + batch_id * append_rows if kind == "after" else batch_id
                r = bench.run(
                    bench.sink(path), batch_id, partitions(start, append_rows, parts, False)
                )
                took.append(r["commit"])
            row[kind] = took
            bench.client.remove(path)
        results.append(row)
    return results


def print_append_costs(results: list[dict[str, Any]], append_rows: int, repeats: int) -> None:
    """The table of ``append_costs``' results."""
    print(
        f"\n2. commit of a {append_rows}-row append against the table's size "
        f"(ms, median of {repeats} batches)"
    )
    header = ["table rows", "unsorted", "x 1st", "sorted, keys after", "x 1st"]
    header += ["sorted, keys overlap", "x 1st"]
    print(
        f"{header[0]:>12}{header[1]:>10}{header[2]:>7}{header[3]:>20}{header[4]:>7}"
        f"{header[5]:>21}{header[6]:>7}"
    )
    first: dict[str, float] = {}
    for row in results:
        line = f"{row['size']:>12,}"
        for kind, width in (("unsorted", 10), ("after", 20), ("overlap", 21)):
            if row[kind] is None:
                line += f"{'(not run)':>{width}}{'':>7}"
                continue
            ms = statistics.median(row[kind])
            first.setdefault(kind, ms)
            line += f"{ms:>{width}.0f}{ms / first[kind]:>7.2f}"
        print(line)
    print(
        "    ways: unsorted = merge-append (combine_chunks), keys after = sorted-append, "
        "overlap = merge of table + batch into the table"
    )


def spill_cost(bench: Bench, rows: int, parts: int, request_rows: int) -> None:
    print(f"\n3. spill cost: {rows} rows in {parts} partitions of {ARROW_BATCH}-row record batches")
    print(f"{'rows_per_request':>18}{'write ms':>10}{'spilled MB':>12}")
    for per_request in (rows, request_rows):
        sink = bench.sink(f"//bench/spill_{per_request}", rows_per_request=per_request)
        r = bench.run(sink, 0, partitions(0, rows, parts))
        print(f"{per_request:>18,}{r['write_ms']:>10.0f}{r['spilled'] / 1e6:>12.1f}")


@contextlib.contextmanager
def session() -> Iterator[Bench]:
    """A started emulator with a ``//bench`` folder, the sink's log events captured."""
    saved = structlog.get_config()
    emu = YtEmulator().start()
    bench = Bench(emu)
    logging.getLogger("Yt").setLevel(logging.WARNING)  # after the client set its logger up
    structlog.configure(processors=[bench.keep])
    try:
        bench.client.create("map_node", "//bench")
        yield bench
    finally:
        emu.stop()
        structlog.configure(**saved)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--append-rows", type=int, default=10_000)
    parser.add_argument("--sizes", default="10000,100000,1000000,10000000")
    parser.add_argument("--merge-sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--spill-rows", type=int, default=200_000)
    parser.add_argument("--spill-request-rows", type=int, default=20_000)
    args = parser.parse_args(argv)
    with session() as bench:
        sink_against_plain(bench, args.rows, args.partitions, args.batches)
        sizes = [int(s) for s in args.sizes.split(",")]
        merge_sizes = [int(s) for s in args.merge_sizes.split(",")]
        costs = append_costs(
            bench, args.append_rows, sizes, merge_sizes, args.partitions, args.repeats
        )
        print_append_costs(costs, args.append_rows, args.repeats)
        spill_cost(bench, args.spill_rows, args.partitions, args.spill_request_rows)


if __name__ == "__main__":
    main()
