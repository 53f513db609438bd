"""eosink-delta beside Delta's own streaming sink in the report: throughput on the report's
stream (section 1) and the per-batch cost as the table's history grows (section 3).

Delta's sink is the engine's own exactly-once sink, what a Delta user has without eosink: it
runs on Spark 4.2 (delta-spark 4.4), so ``eosink_delta_benchmarks.reference`` runs every path
in one child process of that Spark, Spark's parquet sink beside them as the common anchor of
section 1. This module turns what it measured into the report's tables and targets: the data
source >= 0.9x Delta's sink; eosink-delta's per-batch cost over the history <= 1.5x.
"""

from __future__ import annotations

from eosink_delta_benchmarks import reference

from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio

SECTION = "6. beside Delta's sink"
THROUGHPUT_LIMIT = 0.9  # eosink-delta's data source >= 0.9x Delta's streaming sink
HISTORY_LIMIT = 1.5  # the report's flatness rule (section 3)
DOORS = (reference.DATA_SOURCE, reference.FOREACH_BATCH)


def run(
    work: str,
    batches: int,
    rows: int,
    repeat: int,
    warm: bool,
    small_batches: int,
    progress: Progress,
) -> tuple[list[Table], list[Target]]:
    """Both runs (one Spark 4.2 process), their two tables and their targets."""
    r = reference.run(work, batches, rows, repeat, warm, small_batches, progress)
    return [throughput_table(r), history_table(r)], throughput_targets(r) + history_targets(r)


def session_note(r: reference.Results) -> str:
    partitions = (
        f"spark.databricks.delta.snapshotPartitions={r.snapshot_partitions} (as the project's "
        "Delta tests; Delta's default of 50 makes its sink rebuild the table's state in 50 "
        "tasks at every batch, seconds a batch on local[2])"
        if r.snapshot_partitions
        else "every Delta setting at its default"
    )
    return (
        f"One Spark {r.pyspark} session, local[2], delta-spark 4.4 (its SQL extension and "
        f"catalog), {partitions}; Delta's other settings at their defaults (a checkpoint every "
        f"10 commits). The session's JVM started in {r.start_s:.0f} s; the whole child took "
        f"{r.total_s:.0f} s."
    )


def throughput_table(r: reference.Results) -> Table:
    t = r.throughput
    body = []
    for name in t.seconds:
        spread = max(t.seconds[name]) / t.best(name)
        body.append(
            (
                name,
                f"{t.total / t.best(name):,.0f}",
                f"{t.best(name):.1f} / {t.median(name):.1f}",
                ratio(spread),
                ratio(t.ratio(name, reference.DELTA)),
                ratio(t.ratio(name, reference.SPARK)),
            )
        )
    rule = "after one warm-up run of every path" if r.warm else "without warm-up"
    checks = sum(sum(s) for s in r.checks_s.values())
    return Table(
        f"Throughput beside Delta's streaming sink: {r.batches} x {r.rows:,} rows x 5 columns",
        (
            "sink",
            "rows/s (best)",
            "seconds best / median",
            "spread (worst / best)",
            "vs Delta's streaming sink",
            "vs Spark's parquet sink",
        ),
        tuple(body),
        (
            f"Best of {r.repeat} interleaved rounds {rule}; ratios from the best runs (above "
            "1.00x: faster). The report's stream (one Parquet file a micro-batch, "
            'availableNow). Delta\'s streaming sink: `writeStream.format("delta")` to a path; '
            "eosink-delta's foreachBatch with the sink's defaults (delta-rs commit, the file "
            "writer it picks: Spark's, on a local path).",
            session_note(r),
            "Spark's parquet sink here runs in this Spark 4.2 session, not in section 1's: "
            "compare the ratios, not the seconds, with section 1. Every output was read back "
            "(the Delta tables by delta-spark) and held every row exactly once: count = count "
            f"distinct id = {t.total:,} after each path's first run and the warm-ups, count = "
            f"{t.total:,} after the others ({checks:.0f} s of checks in all, not timed).",
        ),
    )


def history_table(r: reference.Results) -> Table:
    window = min(h.window for h in r.history.values())
    body = []
    for name, h in r.history.items():
        body.append(
            (
                name,
                f"{h.first():.0f}",
                f"{h.last():.0f}",
                ratio(h.growth),
                f"{h.first(h.trigger_ms):.0f} / {h.last(h.trigger_ms):.0f}",
                str(h.checkpoints),
                f"{h.seconds:.0f}",
            )
        )
    return Table(
        f"Per-batch cost as the history grows, beside Delta's streaming sink: "
        f"{r.small_batches} micro-batches of {reference.child.SMALL_ROWS} rows",
        (
            "sink",
            f"addBatch ms, batches 1-{window} (median)",
            f"addBatch ms, last {window} (median)",
            "growth",
            "whole trigger ms, first / last",
            "Delta checkpoints at the end",
            "seconds, all batches",
        ),
        tuple(body),
        (
            "One small Parquet file a micro-batch (maxFilesPerTrigger=1, availableNow), each "
            "sink from a new table. addBatch: Spark's own timing of the sink in the query's "
            "progress (the write and the commit; for foreachBatch the whole function); batch 0, "
            "which makes the table, is left out. Whole trigger: the batch's triggerExecution "
            "(with the source's listing and the query's own checkpoint).",
            session_note(r),
        ),
    )


def throughput_targets(r: reference.Results) -> list[Target]:
    value = r.throughput.ratio(reference.DATA_SOURCE, reference.DELTA)
    return [
        Target(
            SECTION,
            f"{reference.DATA_SOURCE} vs {reference.DELTA}",
            f">= {THROUGHPUT_LIMIT:.2f}x",
            ratio(value),
            value >= THROUGHPUT_LIMIT,
        )
    ]


def history_targets(r: reference.Results) -> list[Target]:
    delta = r.history[reference.DELTA]
    found = []
    for door in DOORS:
        h = r.history[door]
        found.append(
            Target(
                SECTION,
                f"{door}: addBatch, last {h.window} vs batches 1-{h.window} of "
                f"{r.small_batches:,}",
                f"<= {HISTORY_LIMIT:.1f}x",
                f"{ratio(h.growth)} (Delta's streaming sink: {ratio(delta.growth)})",
                h.growth <= HISTORY_LIMIT,
            )
        )
    return found
