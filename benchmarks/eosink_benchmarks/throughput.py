"""Section 1: throughput of every sink on the same stream, beside Spark's sinks.

The stream and the paths are the packages' own benchmarks' (``eosink_files_benchmarks.throughput``
of sink-files: the input, noop, Spark's parquet sink and eosink-files' paths;
``eosink_delta_benchmarks.throughput`` of sink-delta: eosink-delta's paths); this module adds
the example third-party sink, the partitioned variant and the report's measuring rule.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

import attrs
from eosink_delta_benchmarks import throughput as delta_throughput
from eosink_files_benchmarks import throughput as files_throughput

import eosink
from eosink.registry import installed_sinks
from eosink_benchmarks import iceberg
from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio
from eosink_benchmarks.timing import Timings, measure

#: A column of the stream with 50 distinct values
#: (``eosink_files_benchmarks.throughput.make_input``).
PARTITION_COLUMN = "country"

#: The files benchmark's names -> the report's.
FILES_NAMES = {
    "noop": "noop",
    "spark parquet": "Spark's parquet sink",
    "python data source floor": "floor: a Python data source that drains its Arrow batches",
    "python data source floor, batches by rows": "floor, batches by rows",
    "eosink data source": "eosink-files, data source",
    "eosink data source, batches by rows": "eosink-files, data source, batches by rows",
    "eosink foreachBatch, spark writer": "eosink-files, foreachBatch, spark writer",
    "eosink foreachBatch, arrow writer": "eosink-files, foreachBatch, arrow writer",
}
DELTA_NAMES = {
    "eosink-delta (data source)": "eosink-delta, data source",
    "eosink-delta (fB, spark)": "eosink-delta, foreachBatch, spark writer",
    "eosink-delta (fB, arrow)": "eosink-delta, foreachBatch, arrow writer",
}
SQLITE = "eosink-sqlite (example), foreachBatch"
SQLITE_DS = "eosink-sqlite (example), data source"
SPARK = FILES_NAMES["spark parquet"]
NOOP = FILES_NAMES["noop"]
FLOOR = FILES_NAMES["python data source floor"]
#: Each delta or iceberg path and the files path it is compared with.
TWINS = {
    "eosink-delta, data source": "eosink-files, data source",
    iceberg.DATA_SOURCE: "eosink-files, data source",
    "eosink-delta, foreachBatch, spark writer": "eosink-files, foreachBatch, spark writer",
    "eosink-delta, foreachBatch, arrow writer": "eosink-files, foreachBatch, arrow writer",
}


@attrs.frozen
class Variant:
    title: str
    partition_by: tuple[str, ...]
    results: dict[str, Timings]


def path_starts(
    spark: Any, folder: str, source: str, partition_by: tuple[str, ...]
) -> dict[str, Callable[[], Any] | str]:
    """name -> start() of a query writing ``source`` into ``folder``, or why it cannot run."""
    installed = installed_sinks()
    starts: dict[str, Callable[[], Any] | str] = {}
    files = files_throughput.configs(
        spark, folder, "q", source, "files" in installed, None, partition_by
    )
    for name, start in files:
        starts[FILES_NAMES[name]] = start or "no `files` entry point installed"
    if partition_by:
        del starts[NOOP]  # the same work as unpartitioned: noop writes nothing

    def writer() -> Any:
        return files_throughput.stream(spark, source).writeStream.trigger(availableNow=True)

    def out(name: str) -> tuple[str, str]:
        return os.path.join(folder, name), os.path.join(folder, name + "-ckpt")

    delta = delta_throughput.delta_paths(writer, out, partition_by=partition_by)
    for name, start in delta.items():
        usable = "delta" in installed  # every delta path finds the sink by its name
        starts[DELTA_NAMES[name]] = start if usable else "no `delta` entry point installed"
    usable = "iceberg" in installed  # the data source finds the sink by its name
    for name, start in iceberg.throughput_starts(writer, folder, partition_by).items():
        if name == iceberg.DATA_SOURCE and not usable:
            start = "no `iceberg` entry point installed"
        starts[name] = start
    if partition_by:
        starts[SQLITE] = starts[SQLITE_DS] = "not partitioned: one SQLite table"
    else:

        def sqlite() -> Any:
            from eosink_sqlite.sink import SqliteSink

            sink = SqliteSink(path=os.path.join(folder, "out.db"))
            writer_fn = eosink.foreach_batch(sink, writer_id="bench")
            return (
                writer()
                .foreachBatch(writer_fn)
                .option("checkpointLocation", os.path.join(folder, "sqlite-ckpt"))
                .start()
            )

        def sqlite_ds() -> Any:
            return (
                writer()
                .format("eosink-sqlite")
                .option("writerId", "bench")
                .option("path", os.path.join(folder, "out-ds.db"))
                .option("checkpointLocation", os.path.join(folder, "sqlite-ds-ckpt"))
                .start()
            )

        starts[SQLITE] = sqlite
        starts[SQLITE_DS] = sqlite_ds if "sqlite" in installed else "no `sqlite` entry point"
    return starts


def run_variant(
    spark: Any,
    work: str,
    source: str,
    partition_by: tuple[str, ...],
    repeat: int,
    progress: Progress,
    warm: bool,
) -> dict[str, Timings]:
    names = path_starts(spark, os.path.join(work, "probe"), source, partition_by)

    def runner(name: str) -> Callable[[str], None]:
        def run(label: str) -> None:
            folder = os.path.join(work, label)
            source_now = source if label != "warm" else source + "-warm"
            query = path_starts(spark, folder, source_now, partition_by)[name]()
            query.awaitTermination()
            if query.exception():
                raise RuntimeError(f"{name}: {query.exception()}")
            shutil.rmtree(folder, ignore_errors=True)

        return run

    paths = {name: runner(name) if callable(start) else start for name, start in names.items()}
    return measure(paths, repeat, progress, warm)


def run(
    spark: Any, work: str, batches: int, rows: int, repeat: int, warm: bool, progress: Progress
) -> list[Variant]:
    """Both variants' timings; the warm-up reads a small copy of the stream."""
    source = os.path.join(work, "in")
    progress.step(f"writing the input: {batches} x {rows:,} rows")
    files_throughput.make_input(source, batches, rows)
    files_throughput.make_input(source + "-warm", 2, min(rows, files_throughput.WARMUP_ROWS))
    variants = []
    for title, partition_by in (
        ("unpartitioned", ()),
        (f"partitionBy({PARTITION_COLUMN!r}), 50 values", (PARTITION_COLUMN,)),
    ):
        progress.step(title)
        results = run_variant(spark, work, source, partition_by, repeat, progress, warm)
        variants.append(Variant(title, partition_by, results))
    return variants


def tables(
    variants: list[Variant], batches: int, rows: int, repeat: int, warm: bool
) -> list[Table]:
    total = batches * rows
    rule = "after one warm-up run of every path" if warm else "without warm-up"
    out = []
    noop = variants[0].results.get(NOOP)
    for variant in variants:
        res = variant.results
        spark = res.get(SPARK)
        body = []
        for name, t in res.items():
            if not t.ran:
                body.append((name, "n/a", "n/a", "", "", "", "", t.note))
                continue
            body.append(
                (
                    name,
                    f"{total / t.best:,.0f}",
                    f"{t.best:.1f} / {t.median:.1f}",
                    ratio(t.spread),
                    ratio(spark.best / t.best) if spark and spark.ran else "",
                    ratio(noop.best / t.best) if noop and noop.ran else "",
                    ratio(res[TWINS[name]].best / t.best)
                    if name in TWINS and res[TWINS[name]].ran
                    else "",
                    "",
                )
            )
        out.append(
            Table(
                f"Throughput, {variant.title}: {batches} x {rows:,} rows x 5 columns",
                (
                    "sink",
                    "rows/s (best)",
                    "seconds best / median",
                    "spread (worst / best)",
                    "vs Spark's sink",
                    "vs noop",
                    "vs eosink-files, same path",
                    "note",
                ),
                tuple(body),
                (
                    f"Best of {repeat} {rule}; ratios from the best runs (above 1.00x: faster).",
                    "The floor is Spark's hand-over of the rows to a Python data source that "
                    "writes nothing: what a data-source door costs above it is eosink's. "
                    "'Batches by rows': spark.sql.execution.arrow.maxBytesPerBatch set to "
                    "2147483647 for that query, which turns off the byte check Spark makes after "
                    "every row (eosink's foreachBatch paths do this for their own write).",
                    "Every Parquet path writes snappy (Spark's default); eosink-iceberg too, "
                    "though a table without write.parquet.compression-codec gets Iceberg's "
                    "zstd, ~0.07 CPU s more per 1M rows.",
                ),
            )
        )
    return out


def targets(variants: list[Variant]) -> list[Target]:
    found = []
    for variant in variants:
        res = variant.results
        spark = res.get(SPARK)

        def vs(name: str, base: Timings | None) -> float | None:
            t = res.get(name)
            return base.best / t.best if t and t.ran and base and base.ran else None

        # The Arrow paths: within 5% of Spark's sink unpartitioned, at least as fast partitioned.
        arrow_limit = 1.0 if variant.partition_by else 0.95
        checks = [
            (
                "eosink-files foreachBatch (default file writer: spark) vs Spark's sink",
                vs("eosink-files, foreachBatch, spark writer", spark),
                1.0,
            ),
        ]
        for arrow_path in (
            "eosink-files, data source",
            "eosink-files, data source, batches by rows",
            "eosink-files, foreachBatch, arrow writer",
        ):
            checks.append((f"{arrow_path} vs Spark's sink", vs(arrow_path, spark), arrow_limit))
        for twin, files in TWINS.items():
            limit = 0.95 if twin.endswith("data source") else 0.9
            checks.append((f"{twin} vs {files}", vs(twin, res.get(files)), limit))
        found += iceberg.throughput_targets(f"1. throughput, {variant.title}", res)
        for what, value, limit in checks:
            found.append(
                Target(
                    f"1. throughput, {variant.title}",
                    what,
                    f">= {limit:.2f}x",
                    "n/a" if value is None else f"{value:.2f}x",
                    None if value is None else value >= limit,
                )
            )
    return found
