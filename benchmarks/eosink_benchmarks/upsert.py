"""Keyed upserts in the report (section 1d): each sink's upsert beside its natural anchor.

Runs the packages' own benchmarks (``eosink_<package>_benchmarks.upsert``), driver-side, without
Spark (which would add the same hand-over to every path): one change feed of ``batches``
batches of ``rows`` rows keyed by ``id``, each batch after the first half new keys and half keys
the last few batches inserted, through eosink's upsert (rows and proof in one commit) and,
interleaved in the same process, the same rows through the anchor, at-least-once:

* postgres: psycopg, COPY into a temp table + ``INSERT ... ON CONFLICT (id) DO UPDATE`` in one
  transaction (the path eosink takes, minus its staging tables and proof);
* iceberg: pyiceberg's ``table.upsert``;
* delta: delta-rs' ``merge(...).when_matched_update_all().when_not_matched_insert_all()``.

Targets: eosink >= :data:`THROUGHPUT_LIMIT` x the anchor's rows/s, and eosink's per-batch cost
at the last batches <= :data:`GROWTH_LIMIT` x its cost at batch 10, the table having grown ~20x
in between (a batch costs its rows and the files it touches, not the table).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from typing import Any

from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio, verdict

from eosink.testing.change_feed import table_rows

THROUGHPUT_LIMIT = 0.8
GROWTH_LIMIT = 1.5
SECTION = "1d. upsert"


def first_batch(batches: int, window: int) -> int:
    """The first batch of the early window: batch 10, or earlier in a run too short for it."""
    return min(10, max(1, batches - 2 * window))


def run_postgres(work: str, batches: int, rows: int) -> dict[str, Any]:
    from eosink_postgres_benchmarks import upsert as bench

    from eosink.testing.postgres import postgres_server_running

    with postgres_server_running() as server:
        return bench.measure(server.url(), batches, rows)


def run_iceberg(work: str, batches: int, rows: int) -> dict[str, Any]:
    from eosink_iceberg_benchmarks import upsert as bench

    return bench.measure(work, batches, rows)


def run_delta(work: str, batches: int, rows: int) -> dict[str, Any]:
    from eosink_delta_benchmarks import upsert as bench

    return bench.measure(work, batches, rows)


SINKS: dict[str, Callable[[str, int, int], dict[str, Any]]] = {
    "postgres": run_postgres,
    "iceberg": run_iceberg,
    "delta": run_delta,
}


def run(
    work: str, batches: int, rows: int, window: int, progress: Progress
) -> tuple[list[Table], list[Target]]:
    """Every sink's benchmark; the throughput table, the growth table and their targets."""
    results = {}
    for sink, measure in SINKS.items():
        progress.step(f"{sink}: {batches} batches x {rows:,} rows, eosink and the anchor")
        folder = os.path.join(work, f"upsert-{sink}")
        os.makedirs(folder, exist_ok=True)
        results[sink] = measure(folder, batches, rows)
    load = os.getloadavg()[0]
    return (
        [
            throughput_table(results, batches, rows, load),
            growth_table(results, batches, rows, window),
        ],
        targets(results, batches, window),
    )


def rate(seconds: list[float], rows: int) -> float:
    """Rows/s over batches 1.. (batch 0 creates the table: the warm-up)."""
    return len(seconds[1:]) * rows / sum(seconds[1:])


def throughput_table(
    results: dict[str, dict[str, Any]], batches: int, rows: int, load: float
) -> Table:
    body = []
    for sink, r in results.items():
        anchor = rate(r["seconds"][r["anchor"]], rows)
        for path in (r["eosink"], r["anchor"]):
            seconds = r["seconds"][path][1:]
            ms = [s * 1000 for s in seconds]
            median = statistics.median(ms)
            p95 = sorted(ms)[min(len(ms) - 1, int(0.95 * len(ms)))]
            mine = rate(r["seconds"][path], rows)
            body.append(
                (
                    sink,
                    path,
                    f"{mine:,.0f}",
                    f"{median:.1f}",
                    f"{p95:.1f}",
                    ratio(p95 / median),
                    ratio(mine / anchor),
                )
            )
    return Table(
        f"Keyed upserts: {batches} batches x {rows:,} rows x 5 columns (after batch 0: half new "
        f"keys, half keys of the last 5 batches), table at {table_rows(batches, rows):,} rows",
        (
            "sink",
            "path",
            "rows/s",
            "median ms per batch",
            "p95 ms",
            "spread (p95/median)",
            "vs anchor",
        ),
        tuple(body),
        (
            "Driver-side, no Spark: each batch in two partitions through the kit's run_batch "
            "(eosink: the whole protocol, rows and proof in one commit), the anchor the same rows "
            "at-least-once, interleaved batch by batch in one process (their order alternating). "
            "rows/s over batches 1.. (batch 0 creates the tables); at the end both tables hold "
            "the same rows (checked). postgres: one server of its own, the anchor on one "
            "connection kept open, COPY into a temp table + INSERT ... ON CONFLICT (id) DO "
            "UPDATE in one transaction, as eosink moves its staged rows. iceberg: SQL catalog "
            "on SQLite, both tables with merged manifests and the newest 10 snapshots kept "
            "(the anchor's expired after each batch, untimed); the anchor loads its table each "
            "batch. delta: local disk, eosink on the delta-rs engine; the anchor opens its table "
            "(DeltaTable(path)) each batch, as a foreachBatch function does, while eosink's sink "
            f"keeps its view of the log between batches. Load average after: {load:.1f}.",
        ),
    )


def growth_table(results: dict[str, dict[str, Any]], batches: int, rows: int, window: int) -> Table:
    first = first_batch(batches, window)
    early, late = table_rows(first + 1, rows), table_rows(batches, rows)
    body = []
    for sink, r in results.items():
        for path in (r["eosink"], r["anchor"]):
            seconds = r["seconds"][path]
            a = statistics.median(seconds[first : first + window]) * 1000
            b = statistics.median(seconds[-window:]) * 1000
            mark = verdict(b / a <= GROWTH_LIMIT) if path == r["eosink"] else ""
            body.append((sink, path, f"{a:.1f}", f"{b:.1f}", ratio(b / a), mark))
    return Table(
        f"Keyed upserts: per-batch cost as the table grows, median ms of {window} batches, "
        f"from batch {first} (table ~{early:,} rows) vs the last (~{late:,} rows, "
        f"{late / early:.1f}x)",
        ("sink", "path", f"batch {first}", f"last {window}", "ratio", f"<= {GROWTH_LIMIT:.1f}x"),
        tuple(body),
        (
            "The same batch size all along: a batch costs its rows and the files (rows) its keys "
            "touch, not the table, when the ratio stays near 1. The anchors are shown for "
            "comparison (no target).",
        ),
    )


def targets(results: dict[str, dict[str, Any]], batches: int, window: int) -> list[Target]:
    first = first_batch(batches, window)
    out = []
    for sink, r in results.items():
        seconds = r["seconds"]
        value = rate(seconds[r["eosink"]], 1) / rate(seconds[r["anchor"]], 1)
        out.append(
            Target(
                SECTION,
                f"eosink-{sink} upsert vs {r['anchor']}, rows/s",
                f">= {THROUGHPUT_LIMIT:.1f}x",
                ratio(value),
                value >= THROUGHPUT_LIMIT,
            )
        )
        mine = seconds[r["eosink"]]
        growth = statistics.median(mine[-window:]) / statistics.median(mine[first : first + window])
        out.append(
            Target(
                SECTION,
                f"eosink-{sink} upsert: cost per batch, last {window} vs batch {first}",
                f"<= {GROWTH_LIMIT:.1f}x",
                ratio(growth),
                growth <= GROWTH_LIMIT,
            )
        )
    return out


def spark_delta(
    work: str, batches: int, rows: int, window: int, progress: Progress
) -> tuple[Table, list[Target]]:
    """Keyed upserts into Delta through Spark (4.2, Delta 4.4's jars): eosink-delta's two
    engines beside the MERGE users write in foreachBatch with ``txnAppId``/``txnVersion``
    (``eosink_delta_benchmarks.upsert_spark``); one query per path over the same feed."""
    from eosink_delta_benchmarks import upsert_spark as bench

    progress.step(f"delta through Spark: {batches} batches x {rows:,} rows, three paths")
    folder = os.path.join(work, "upsert-delta-spark")
    os.makedirs(folder, exist_ok=True)
    result = bench.measure(folder, batches, rows)
    seconds, anchor = result["seconds"], result["anchor"]
    first = first_batch(batches, window)
    body, out = [], []
    for path in bench.PATHS:
        spent = seconds[path]
        mine, theirs = rate(spent, rows), rate(seconds[anchor], rows)
        early = statistics.median(spent[first : first + window]) * 1000
        late = statistics.median(spent[-window:]) * 1000
        body.append(
            (
                path,
                f"{mine:,.0f}",
                f"{early:.0f}",
                f"{late:.0f}",
                ratio(late / early),
                ratio(mine / theirs),
            )
        )
        if path != anchor:
            out.append(
                Target(
                    SECTION,
                    f"{path} vs {anchor} (Spark), rows/s",
                    f">= {THROUGHPUT_LIMIT:.1f}x",
                    ratio(mine / theirs),
                    mine / theirs >= THROUGHPUT_LIMIT,
                )
            )
    table = Table(
        f"Keyed upserts into Delta through Spark: {batches} batches x {rows:,} rows "
        f"(the same feed), table at {table_rows(batches, rows):,} rows",
        (
            "path",
            "rows/s",
            f"ms per batch, batch {first}",
            f"last {window}",
            "growth",
            "vs Delta's MERGE + txn",
        ),
        tuple(body),
        (
            "Spark 4.2 with Delta 4.4's jars, one process (eosink.testing.spark_child), local "
            "disk, spark.databricks.delta.snapshotPartitions=1 (as section 6); one streaming "
            "query per path over the feed's files (one a micro-batch), foreachBatch; ms per "
            "batch is Spark's addBatch time (medians), rows/s over batches 1.. . The anchor is "
            "Delta's documented idempotent MERGE: txnAppId and txnVersion set in the session "
            "around the MERGE statement. At the end the three "
            f"tables hold the same {result['rows']:,} rows (checked).",
        ),
    )
    return table, out
