"""Section 1, on S3: the throughput of one stream into a bucket of the loopback S3 server,
Spark's own parquet sink (``s3a://``, Hadoop's S3A) beside eosink-files and eosink-delta.

The stream is section 1's (``eosink_files_benchmarks.throughput.make_input``: one input file a
micro-batch), and so is the measuring rule (:func:`eosink_benchmarks.timing.measure`). Every
path writes into a fresh bucket of one server (``eosink.testing.s3``: moto in a child process,
one mutating request at a time), in one Spark session; the checkpoints stay on local disk, so
that the figures are the sinks' and not those of Spark's checkpoint on S3. ``noop`` is the floor
of the stream: the cost of reading the input and producing the rows.

Spark reaches the server through S3A, whose jars (3rdparty/jvm/artifacts.txt's ``s3a`` set) must
be on the classpath of the JVM the session starts: a JVM that the report started earlier (section
1's) would not have them, so the measurement runs as a process of its own
(``python -m eosink_benchmarks.s3``), which hands its timings back as JSON and its progress as
lines on stdout. After the runs every output of the measured rounds is read back (Spark from
``s3a://``, eosink-files' committed files, delta-rs' table) and must hold each id of the stream
exactly once.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import attrs
import structlog

from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio
from eosink_benchmarks.timing import Timings, measure

SECTION = "1e. throughput on S3"
NOOP = "noop"
SPARK = "Spark's parquet sink, s3a://"
FILES_DS = "eosink-files, data source"
FILES_FB = "eosink-files, foreachBatch, arrow writer"
DELTA_DS = "eosink-delta, data source"
DELTA_FB = "eosink-delta, foreachBatch, arrow writer"
#: Each delta path and the files path it is compared with.
TWINS = {DELTA_DS: FILES_DS, DELTA_FB: FILES_FB}
#: (what, measured path, base path, at least): the targets of the S3 variant. The files door
#: keeps the target it has on local disk against Spark's sink; delta's door pays one commit
#: of the Delta log a batch more than the files door.
TARGETS = (
    (f"{FILES_DS} vs {SPARK}", FILES_DS, SPARK, 0.85),
    (f"{DELTA_DS} vs {FILES_DS}", DELTA_DS, FILES_DS, 0.90),
)
#: Section 1's session settings.
SESSION_CONF = {
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.ui.showConsoleProgress": "false",
}
#: The child's progress lines on its stdout start so (the JVM's own output shares the stream).
PROGRESS = "progress: "


@attrs.frozen
class Output:
    """Where one run of one path wrote: ``kind`` says how to read it back."""

    name: str
    label: str
    kind: str  # "spark", "files" or "delta"
    uri: str


@attrs.frozen
class Results:
    """What the measuring process hands back: the timings and, per path, the rows checked."""

    timings: dict[str, Timings]
    checked: dict[str, str]


def fsspec_options(endpoint: Any) -> dict[str, Any]:
    """s3fs' options for the server; no listings cached, so that a read after the runs lists
    the bucket again."""
    return {**endpoint.fsspec_options(), "use_listings_cache": False, "skip_instance_cache": True}


def path_starts(
    spark: Any, endpoint: Any, folder: str, source: str, outputs: list[Output], label: str
) -> dict[str, Callable[[], Any]]:
    """name -> start() of a query writing ``source`` into a fresh bucket (its checkpoint in
    ``folder``); each start records its output in ``outputs``."""
    from eosink_files_benchmarks import throughput as files_throughput

    import eosink

    fsspec = endpoint.fsspec_options()
    files_options = {
        "storage.key": endpoint.access_key,
        "storage.secret": endpoint.secret_key,
        "storage.client_kwargs.endpoint_url": endpoint.url,
        "storage.client_kwargs.region_name": endpoint.region,
    }
    object_store = endpoint.object_store_options()
    delta_options = {f"storage.{k}": v for k, v in object_store.items()}

    def writer(name: str) -> Any:
        return (
            files_throughput.stream(spark, source)
            .writeStream.trigger(availableNow=True)
            .option("checkpointLocation", os.path.join(folder, f"{name}-ckpt"))
        )

    def target(name: str, kind: str, scheme: str = "s3") -> str:
        uri = f"{scheme}://{endpoint.create_bucket()}/out"
        outputs.append(Output(name, label, kind, uri))
        return uri

    def noop() -> Any:
        return writer("noop").format("noop").start()

    def spark_parquet() -> Any:
        uri = target(SPARK, "spark", "s3a")
        return writer("spark").format("parquet").option("path", uri).start()

    def door(name: str, kind: str, fmt: str, options: dict[str, str]) -> Callable[[], Any]:
        def start() -> Any:
            uri = target(name, kind)
            query = writer(kind + "-ds").format(fmt).option("writerId", "bench")
            return query.option("path", uri).options(**options).start()

        return start

    def foreach(name: str, kind: str, sink: Callable[[str], Any]) -> Callable[[], Any]:
        def start() -> Any:
            fn = eosink.foreach_batch(sink(target(name, kind)), writer_id="bench")
            return writer(kind + "-fb").foreachBatch(fn).start()

        return start

    return {
        NOOP: noop,
        SPARK: spark_parquet,
        FILES_DS: door(FILES_DS, "files", "eosink-files", files_options),
        FILES_FB: foreach(
            FILES_FB,
            "files",
            lambda uri: eosink.sink("files", path=uri, file_writer="arrow", storage_options=fsspec),
        ),
        DELTA_DS: door(DELTA_DS, "delta", "eosink-delta", delta_options),
        DELTA_FB: foreach(
            DELTA_FB,
            "delta",
            lambda uri: eosink.sink(
                "delta", path=uri, file_writer="arrow", storage_options=object_store
            ),
        ),
    }


def read_ids(spark: Any, endpoint: Any, output: Output) -> tuple[int, int, int, int]:
    """(rows, distinct ids, least id, greatest id) of one output, read as its readers read it:
    Spark through its manifest, eosink-files' committed files, delta-rs' current table."""
    if output.kind == "spark":
        from pyspark.sql import functions as F  # noqa: N812 - Spark's usual name

        row = (
            spark.read.parquet(output.uri)
            .agg(F.count("*"), F.count_distinct("id"), F.min("id"), F.max("id"))
            .first()
        )
        return row[0], row[1], row[2], row[3]
    import pyarrow.compute as pc

    if output.kind == "files":
        import eosink_files

        ids = eosink_files.dataset(output.uri, storage_options=fsspec_options(endpoint))
    else:
        from deltalake import DeltaTable

        table = DeltaTable(output.uri, storage_options=endpoint.object_store_options())
        ids = table.to_pyarrow_dataset()
    column = ids.to_table(columns=["id"]).column("id")
    if not len(column):
        return 0, 0, -1, -1
    least, greatest = pc.min_max(column).values()
    return len(column), pc.count_distinct(column).as_py(), least.as_py(), greatest.as_py()


def check(spark: Any, endpoint: Any, outputs: list[Output], total: int) -> dict[str, str]:
    """Every output holds the ids 0 .. total - 1, each once; raises on the first that does not.
    Returns, per path, what was checked."""
    runs: dict[str, int] = {}
    for output in outputs:
        rows, distinct, least, greatest = read_ids(spark, endpoint, output)
        if (rows, distinct, least, greatest) != (total, total, 0, total - 1):
            raise RuntimeError(
                f"{output.name} ({output.label}, {output.uri}): {rows:,} rows, {distinct:,} "
                f"distinct ids from {least} to {greatest}; expected ids 0 to {total - 1:,}, "
                "each once"
            )
        runs[output.name] = runs.get(output.name, 0) + 1
    each = {1: "in its run"}
    return {
        name: f"{total:,} ids, each once, {each.get(n, f'in each of {n} runs')}"
        for name, n in runs.items()
    }


class Relay:
    """The measuring process's :class:`Progress`: its steps as lines on stdout, which the
    report's process shows as its own."""

    def step(self, message: str) -> None:
        print(PROGRESS + message, flush=True)


def measure_on_s3(
    work: str, batches: int, rows: int, repeat: int, warm: bool, cores: int, progress: Any
) -> Results:
    """Every path timed (:func:`measure`), then the outputs of the measured rounds checked.

    The warm-up reads a small copy of the stream, as section 1's; its outputs are not checked
    (another count of rows), nor timed.
    """
    from eosink_files_benchmarks import throughput as files_throughput

    import eosink
    from eosink.testing.jvm import spark_jars
    from eosink.testing.s3 import s3_server
    from eosink.testing.spark import local_spark

    source = os.path.join(work, "in")
    progress.step(f"writing the input: {batches} x {rows:,} rows")
    files_throughput.make_input(source, batches, rows)
    files_throughput.make_input(source + "-warm", 2, min(rows, files_throughput.WARMUP_ROWS))
    with s3_server() as endpoint:
        progress.step("starting Spark with S3A")
        spark = local_spark(
            cores=cores, **SESSION_CONF, **spark_jars("s3a"), **endpoint.spark_s3a_settings()
        )
        eosink.register_data_sources(spark)
        try:
            outputs: list[Output] = []

            def runner(name: str) -> Callable[[str], None]:
                def run(label: str) -> None:
                    folder = os.path.join(work, label)
                    source_now = source if label != "warm" else source + "-warm"
                    starts = path_starts(spark, endpoint, folder, source_now, outputs, label)
                    query = starts[name]()
                    query.awaitTermination()
                    if query.exception():
                        raise RuntimeError(f"{name}: {query.exception()}")

                return run

            names = (NOOP, SPARK, FILES_DS, FILES_FB, DELTA_DS, DELTA_FB)
            paths: dict[str, Callable[[str], None] | str] = {n: runner(n) for n in names}
            timings = measure(paths, repeat, progress, warm)
            measured = [o for o in outputs if o.label != "warm"]
            progress.step(f"reading back {len(measured)} outputs")
            checked = check(spark, endpoint, measured, batches * rows)
        finally:
            spark.stop()
    return Results(timings, checked)


def run(
    work: str, batches: int, rows: int, repeat: int, warm: bool, cores: int, progress: Progress
) -> tuple[list[Table], list[Target]]:
    """The S3 variant's table and targets, measured by a process of its own (see the module)."""
    results = run_process(work, batches, rows, repeat, warm, cores, progress)
    return [table(results, batches, rows, repeat, warm)], targets(results)


def run_process(
    work: str, batches: int, rows: int, repeat: int, warm: bool, cores: int, progress: Progress
) -> Results:
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "results.json")
    command = [
        sys.executable,
        *("-m", __name__ if __name__ != "__main__" else "eosink_benchmarks.s3"),
        *("--work", work, "--json", out, "--cores", str(cores)),
        *("--batches", str(batches), "--rows", str(rows), "--repeat", str(repeat)),
        *(() if warm else ("--no-warm",)),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    log = os.path.join(work, "s3_throughput.log")
    with open(log, "w") as err:
        child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        assert child.stdout is not None
        for line in child.stdout:
            if line.startswith(PROGRESS):
                progress.step(line[len(PROGRESS) :].rstrip("\n"))
            else:
                err.write(line)
        code = child.wait()
    if code:
        with open(log) as f:
            tail = "".join(f.readlines()[-40:])
        raise RuntimeError(f"the S3 throughput benchmark failed ({code}):\n{tail}")
    with open(out) as f:
        return from_json(json.load(f))


def to_json(results: Results) -> dict[str, Any]:
    return {
        "timings": {
            name: {"seconds": list(t.seconds), "note": t.note}
            for name, t in results.timings.items()
        },
        "checked": results.checked,
    }


def from_json(data: dict[str, Any]) -> Results:
    timings = {
        name: Timings(name, tuple(t["seconds"]), t["note"]) for name, t in data["timings"].items()
    }
    return Results(timings, data["checked"])


def table(results: Results, batches: int, rows: int, repeat: int, warm: bool) -> Table:
    """Section 1's table shape, for the paths on S3."""
    total = batches * rows
    rule = "after one warm-up run of every path" if warm else "without warm-up"
    res = results.timings
    spark, noop = res.get(SPARK), res.get(NOOP)
    body = []
    for name, t in res.items():
        note = results.checked.get(name, "writes nothing" if name == NOOP else "")
        if not t.ran:
            body.append((name, "n/a", "n/a", "", "", "", "", t.note))
            continue
        twin = res.get(TWINS.get(name, ""))
        body.append(
            (
                name,
                f"{total / t.best:,.0f}",
                f"{t.best:.1f} / {t.median:.1f}",
                ratio(t.spread),
                ratio(spark.best / t.best) if spark and spark.ran else "",
                ratio(noop.best / t.best) if noop and noop.ran else "",
                ratio(twin.best / t.best) if twin and twin.ran else "",
                note,
            )
        )
    return Table(
        f"Throughput on S3 (loopback server): {batches} x {rows:,} rows x 5 columns",
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
            "Every path writes into a fresh bucket of one loopback S3 server (moto in a process "
            "of its own, one mutating request at a time): Spark's parquet sink through Hadoop's "
            "S3A (`s3a://`), eosink-files through s3fs and eosink-delta through delta-rs' object "
            "store (`s3://`). The checkpoints are on local disk: the table measures the sinks, "
            "not Spark's checkpoint on S3. noop is the floor of the stream (reading the input, "
            "producing the rows). After the runs every output was read back (Spark from s3a:// "
            "through its manifest, eosink-files' committed files, delta-rs' table) and held "
            "every id of the stream exactly once.",
        ),
    )


def targets(results: Results) -> list[Target]:
    res = results.timings
    found = []
    for what, name, base, limit in TARGETS:
        t, b = res.get(name), res.get(base)
        value = b.best / t.best if t and t.ran and b and b.ran else None
        found.append(
            Target(
                SECTION,
                what,
                f">= {limit:.2f}x",
                "n/a" if value is None else f"{value:.2f}x",
                None if value is None else value >= limit,
            )
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="eosink_benchmarks.s3", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--work", required=True, help="scratch folder (input, checkpoints)")
    parser.add_argument("--json", required=True, help="where the results go")
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--no-warm", action="store_true", help="no warm-up run (smoke size)")
    args = parser.parse_args(argv)
    # as the report's process: the sinks' info lines would only fill the log
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    results = measure_on_s3(
        args.work, args.batches, args.rows, args.repeat, not args.no_warm, args.cores, Relay()
    )
    with open(args.json, "w") as f:
        json.dump(to_json(results), f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
