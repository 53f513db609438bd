"""Throughput of the postgres sink beside Spark's JDBC writer and a bare COPY loop, on one stream.

The stream: ``--batches`` micro-batches of ``--rows`` rows x 5 columns (Parquet files read with
``maxFilesPerTrigger``, two files a batch), on ``local[--cores]``, into a PostgreSQL server of
its own (``eosink.testing.postgres``: the machine's binaries, loopback). Every run writes a
fresh table from a fresh checkpoint; rows/s is the whole query's wall time. The runs:

* eosink-postgres through the data source (``format("eosink-postgres")``) and ``foreachBatch``;
* Spark's own JDBC writer (``df.write.jdbc`` in ``foreachBatch``: each partition commits on its
  own, at-least-once), with the PostgreSQL JDBC driver jar (``--jdbc-jar``; by default the
  repository's pinned one, 3rdparty/jvm/artifacts.txt's ``postgres-jdbc``);
* the bare COPY loop: the same stream, each task COPYs the same Arrow batches straight into the
  target with the sink's own encoder (``foreachBatch`` + ``mapInArrow``): no staging table, no
  move, no proof, at-least-once. What eosink-postgres adds to it is the price of exactly-once;
* Arrow to Python, no write: the same ``mapInArrow`` taking the batches and writing nothing,
  the floor of every path that writes from Python workers.

Every path runs once to warm up, then ``--repeat`` interleaved rounds (every path once per
round); the table shows the best and the median and the load average of each run.

The exactly-once overhead per batch: the median time of the driver's hooks (``is_committed`` +
``init`` + ``commit``; the commit moves the staged rows into the target, which grows with the
batch) and the whole query's time per batch beyond the bare COPY loop's.

    ./pants run packages/sink-postgres/benchmarks:throughput          # 5 x 1M rows, local[2]
    python -m eosink_postgres_benchmarks.throughput --rows 100000 --batches 3
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import attrs
import structlog

import eosink
from eosink.testing.hook_timer import HookTimer
from eosink.testing.postgres import postgres_server_running
from eosink.testing.spark import local_spark
from eosink.testing.stream_input import timed_query, write_stream_input
from eosink_postgres_benchmarks.streams import (
    BARE_COPY,
    EOSINK_FB,
    FILES_PER_BATCH,
    JDBC,
    TABLES,
    StreamPaths,
)

#: The jar set of the PostgreSQL JDBC driver (3rdparty/jvm/artifacts.txt), fetched by the
#: repository's own script (build-support/jvm-jars) when no path is given.
JDBC_JAR_SET = "postgres-jdbc"


def find_jdbc_jar(given: str | None = None) -> str | None:
    """The PostgreSQL JDBC driver jar: ``given`` (which must exist), else the repository's
    pinned one, fetched once into its JVM folder; None when it cannot be fetched."""
    from eosink.testing.jvm import JvmJarsError, jars

    if given:
        if not os.path.isfile(given):
            raise FileNotFoundError(f"no PostgreSQL JDBC driver jar at {given}")
        return given
    try:
        found = jars(JDBC_JAR_SET)
    except JvmJarsError as exc:
        print(f"the JDBC driver jar could not be fetched: {exc}", file=sys.stderr, flush=True)
        return None
    return found[0] if found else None


def missing_jar_note() -> str:
    return (
        f"no PostgreSQL JDBC driver jar (the jar set {JDBC_JAR_SET!r} of "
        "3rdparty/jvm/artifacts.txt could not be fetched: above): the Spark JDBC row is left "
        "out; give one with --jdbc-jar"
    )


@attrs.define
class Results:
    """What one benchmark run measured."""

    batches: int
    rows: int
    cores: int
    seconds: dict[str, list[float]] = attrs.Factory(dict)  # path -> per measured round
    loads: dict[str, list[float]] = attrs.Factory(dict)  # path -> 1-min load after each round
    driver_ms: list[float] = attrs.Factory(list)  # eosink foreachBatch: per batch
    commit_ms: list[float] = attrs.Factory(list)
    note: str = ""  # why a path is missing

    @property
    def total(self) -> int:
        return self.batches * self.rows

    def best(self, name: str) -> float:
        return min(self.seconds[name])

    def median(self, name: str) -> float:
        return statistics.median(self.seconds[name])

    def ratio(self, name: str, anchor: str, of: Callable[[str], float]) -> float | None:
        """How many times faster ``name`` ran than ``anchor`` (by ``of``: best or median)."""
        if anchor not in self.seconds or name not in self.seconds:
            return None
        return of(anchor) / of(name)

    def overhead_ms(self) -> float | None:
        """The whole query's time per batch beyond the bare COPY loop's (medians)."""
        if EOSINK_FB not in self.seconds:
            return None
        return (self.median(EOSINK_FB) - self.median(BARE_COPY)) / self.batches * 1000


def measure(
    server: Any,
    work: str,
    batches: int,
    rows: int,
    repeat: int = 3,
    cores: int = 2,
    jar: str | None = None,
    warm: bool = True,
    step: Callable[[str], None] = lambda what: None,
) -> Results:
    """Warm every path once (unless ``warm`` is False), then ``repeat`` interleaved rounds.

    ``jar``: the JDBC driver jar (None: the JDBC path is left out, ``Results.note`` says why).
    ``step`` is told what runs next."""
    source = os.path.join(work, "source")
    if not os.path.exists(source):
        write_stream_input(source, batches, rows, FILES_PER_BATCH)
    warm_source = os.path.join(work, "warm-source")
    if not os.path.exists(warm_source):
        write_stream_input(warm_source, 1, 20_000, FILES_PER_BATCH)
    spark = local_spark(
        cores=cores,
        **{
            "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
            "spark.ui.showConsoleProgress": "false",
        },
        **({"spark.jars": jar} if jar else {}),
    )
    eosink.register_data_sources(spark)
    timer = HookTimer()  # is_committed + init + commit
    paths = StreamPaths(spark, server, work, warm_source, timer)
    runs = paths.runs(with_jdbc=bool(jar))
    results = Results(batches, rows, cores, note="" if jar else missing_jar_note())
    try:
        for name, start in runs.items() if warm else ():  # JVM, Python workers, connections
            step(f"warm-up: {name}")
            timed_query(start)
        paths.source = source
        timer.clear()
        for round_ in range(repeat):
            for name, start in runs.items():
                step(f"run {round_ + 1}/{repeat}: {name}")
                results.seconds.setdefault(name, []).append(timed_query(start))
                results.loads.setdefault(name, []).append(os.getloadavg()[0])
                if name in TABLES:
                    check_rows(server.url(), name, results.total)
    finally:
        spark.stop()
    results.driver_ms = [s * 1000 for s in timer.totals()]
    results.commit_ms = [s * 1000 for s in timer.seconds("commit")]
    return results


def check_rows(url: str, name: str, expected: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        (held,) = conn.execute(f"SELECT count(*) FROM public.{TABLES[name]}").fetchone()
    if held != expected:
        raise AssertionError(f"{name}: {held} rows in the table, expected {expected}")


def table_lines(results: Results) -> list[str]:
    """The results as a Markdown table and the overhead lines."""
    r = results
    lines = [
        f"{r.batches} micro-batches x {r.rows:,} rows x 5 columns, local[{r.cores}], "
        f"{len(next(iter(r.seconds.values()), []))} interleaved rounds after a warm-up",
        "",
        "| run | best s | median s | rows/s (best) | vs Spark JDBC (best, median) "
        "| vs bare COPY (best, median) | load (1 min) per round |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in r.seconds:
        jdbc = [r.ratio(name, JDBC, of) for of in (r.best, r.median)]
        copy = [r.ratio(name, BARE_COPY, of) for of in (r.best, r.median)]
        loads = ", ".join(f"{x:.1f}" for x in r.loads[name])
        lines.append(
            f"| {name} | {r.best(name):.1f} | {r.median(name):.1f} | {r.total / r.best(name):,.0f} "
            f"| {_ratios(jdbc)} | {_ratios(copy)} | {loads} |"
        )
    if r.note:
        lines += ["", r.note]
    if r.driver_ms:
        lines += [
            "",
            f"exactly-once driver time per batch (is_committed + init + commit, foreachBatch): "
            f"median {statistics.median(r.driver_ms):.1f} ms, of which the commit (the move "
            f"staging -> target) {statistics.median(r.commit_ms):.1f} ms, over "
            f"{len(r.driver_ms)} batches of {r.rows:,} rows",
        ]
    overhead = r.overhead_ms()
    if overhead is not None:
        lines.append(
            f"whole query per batch beyond the bare COPY loop (medians): {overhead:.1f} ms"
        )
    return lines


def _ratios(pair: list[float | None]) -> str:
    return "" if pair[0] is None else f"{pair[0]:.2f}x, {pair[1]:.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--jdbc-jar", default=None, help="the PostgreSQL JDBC driver jar")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--no-warm", action="store_true", help="leave the warm-up runs out")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    jar = find_jdbc_jar(args.jdbc_jar)
    work = args.workdir or tempfile.mkdtemp(prefix="eosink-postgres-bench-")
    print(f"load average before: {os.getloadavg()}", flush=True)
    try:
        with postgres_server_running() as server:
            results = measure(
                server,
                work,
                args.batches,
                args.rows,
                args.repeat,
                args.cores,
                jar,
                warm=not args.no_warm,
                step=lambda what: print(what, file=sys.stderr, flush=True),
            )
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(attrs.asdict(results), f)
    print("\n" + "\n".join(table_lines(results)))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
