"""eosink-iceberg beside Iceberg's own Spark streaming sink in the report: throughput on the
report's stream (beside Spark's parquet sink, the anchor of section 1) and the per-batch cost as
the history grows, both measured by ``eosink_iceberg_benchmarks.reference`` on Spark 4.1.4 (the
Spark Iceberg's runtime 1.12 runs on), in one session of its own.

Targets: eosink-iceberg's data source >= 0.9x Iceberg's streaming sink (best runs); each door's
``addBatch`` over its last batches <= 1.5x over its first, Iceberg's own growth beside it.
"""

from __future__ import annotations

from eosink_iceberg_benchmarks import reference

from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio

SECTION = "6. beside Iceberg's sink"
THROUGHPUT_LIMIT = 0.9
HISTORY_LIMIT = 1.5
DOORS = (reference.DATA_SOURCE, reference.FOREACH_BATCH)


def measure(
    work: str,
    batches: int,
    rows: int,
    repeat: int,
    warm: bool,
    small_batches: int,
    progress: Progress,
) -> tuple[list[Table], list[Target]]:
    """Run the benchmark (one process on Spark 4.1.4) and make its tables and targets."""
    progress.step("eosink-iceberg beside Iceberg's streaming sink, Spark 4.1.4")
    result = reference.run(work, batches, rows, repeat, warm, small_batches, progress)
    progress.step(f"done in {result.total_s:.0f} s (the JVM's start {result.start_s:.0f} s)")
    return tables_and_targets(result)


def tables_and_targets(result: reference.Result) -> tuple[list[Table], list[Target]]:
    return [throughput_table(result), history_table(result)], targets(result)


def throughput_table(result: reference.Result) -> Table:
    total = result.batches * result.rows
    body = []
    for name, runs in result.seconds.items():
        body.append(
            (
                name,
                f"{total / result.best(name):,.0f}",
                f"{result.best(name):.1f} / {sorted(runs)[len(runs) // 2]:.1f}",
                ratio(result.speed(name, reference.ICEBERG)),
                ratio(result.speed(name, reference.PARQUET)),
                ", ".join(f"{s:.1f}" for s in runs),
            )
        )
    rule = "after one warm-up run of every path" if result.warm else "without warm-up"
    return Table(
        f"Throughput beside Iceberg's streaming sink (Spark {result.pyspark}, Iceberg 1.12), "
        f"{result.batches} x {result.rows:,} rows x 5 columns, best of {result.repeat}",
        (
            "path",
            "rows/s (best)",
            "best / median s",
            "vs Iceberg's sink",
            "vs Spark's parquet sink",
            "runs, s",
        ),
        tuple(body),
        (
            "Section 1's stream (one input file a micro-batch, `trigger(availableNow=True)`) in "
            f"one Spark {result.pyspark} session of its own, {rule}, rounds interleaved. "
            'Iceberg\'s sink: `writeStream.format("iceberg").toTable(...)`; eosink-iceberg: '
            '`format("eosink-iceberg")` and '
            "`foreachBatch(eosink.foreach_batch(IcebergSink(...)))`. "
            "Every Iceberg table is made beforehand by Iceberg's runtime (format v2, its "
            "defaults: zstd Parquet) in one catalog: Iceberg's JDBC catalog and pyiceberg's SQL "
            "catalog on the same SQLite file. Each run's table held every input row once "
            "(counted by Spark).",
        ),
    )


def history_table(result: reference.Result) -> Table:
    w = result.window
    body = tuple(
        (
            name,
            f"{result.first_ms(name):.0f}",
            f"{result.last_ms(name):.0f}",
            ratio(result.growth(name)),
            str(result.snapshots[name]),
        )
        for name in result.add_batch_ms
    )
    return Table(
        f"Per-batch cost beside Iceberg's streaming sink: Spark's addBatch, median ms, batches "
        f"1-{w} vs the last {w} of {result.small_batches}",
        ("path", f"batches 1-{w}", f"last {w}", "growth", "snapshots at the end"),
        body,
        (
            f"{result.small_batches} micro-batches of {reference.SMALL_ROWS} rows (one file "
            "each, `maxFilesPerTrigger=1`) into a new table per path; addBatch is Spark's "
            "time for the sink's write and commit (foreachBatch: the whole function). Every "
            "table merges manifests (`commit.manifest-merge.enabled`, Java Iceberg's default); "
            f"eosink-iceberg expires all but {reference.KEEP_SNAPSHOTS} snapshots in its "
            "commits (`keep_snapshots`), Iceberg's sink keeps every snapshot.",
        ),
    )


def targets(result: reference.Result) -> list[Target]:
    speed = result.speed(reference.DATA_SOURCE, reference.ICEBERG)
    out = [
        Target(
            SECTION,
            f"{reference.DATA_SOURCE} vs {reference.ICEBERG} (Spark {result.pyspark})",
            f">= {THROUGHPUT_LIMIT:.2f}x",
            f"{speed:.2f}x",
            speed >= THROUGHPUT_LIMIT,
        )
    ]
    theirs = result.growth(reference.ICEBERG)
    for door in DOORS:
        growth = result.growth(door)
        out.append(
            Target(
                SECTION,
                f"{door}, addBatch over the last {result.window} of {result.small_batches} "
                f"batches vs the first (Iceberg's sink: {theirs:.2f}x)",
                f"<= {HISTORY_LIMIT:.1f}x",
                f"{growth:.2f}x",
                growth <= HISTORY_LIMIT,
            )
        )
    return out
