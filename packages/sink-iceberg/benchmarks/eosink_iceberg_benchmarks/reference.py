"""eosink-iceberg beside Iceberg's own Spark streaming sink, on the same stream, in one session.

Iceberg's Spark runtime 1.12 runs on Spark 4.1, not on the project's Spark, so the scenarios
run in a child process on Spark 4.1.4 (``eosink.testing.spark_child``, the child module
:mod:`eosink_iceberg_benchmarks.reference_child`): one JVM, Iceberg's catalog ``eosink`` on the
SQLite file of pyiceberg's SQL catalog (its JDBC catalog, as a user points Spark at pyiceberg's
catalog), eosink's data sources registered. Every Iceberg table is made beforehand by Iceberg's
runtime with the stream's schema (format v2).

* throughput: the report's stream (``eosink_files_benchmarks.throughput.make_input``, one file a
  micro-batch) into Spark's parquet sink (the anchor every throughput table shares), Iceberg's
  streaming sink (``writeStream.format("iceberg").toTable(...)``), and eosink-iceberg's data
  source (``format("eosink-iceberg")``) and foreachBatch doors; every path warmed once, then
  ``repeat`` interleaved rounds (each round in another order); each run's table must then hold
  one row per input row, each id once.
* history: ``small_batches`` micro-batches of a few rows (one small file each) through Iceberg's
  sink and both doors; per batch Spark's ``addBatch`` time. Every table merges its manifests
  (Iceberg's default in Java, set on the table for pyiceberg) and eosink-iceberg expires all but
  :data:`KEEP_SNAPSHOTS` snapshots in its commits, as the report's history section runs it;
  Iceberg's sink keeps every snapshot (expiry is a separate job there).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Protocol

import attrs

#: The Spark version Iceberg's runtime 1.12 is built for (3rdparty/jvm/spark-envs.txt).
SPARK_VERSION = "4.1.4"
#: Iceberg's catalog in the child's session; pyiceberg's SQL catalog of the same name keys
#: its rows by it, so both see the same tables.
SPARK_CATALOG = "eosink"
KEEP_SNAPSHOTS = 10
HISTORY_PROPERTIES = {"commit.manifest-merge.enabled": "true"}
#: Rows of each small file of the history runs.
SMALL_ROWS = 8
#: Batches the history's medians are taken over, at its start and at its end.
WINDOW = 10
#: The warm-up's stream: two files of this many rows (as section 1's).
WARM_ROWS = 200_000
#: Where the child finds its inputs and the catalog: settings of its session.
SETTINGS = {
    name: f"spark.eosink.reference.{name}"
    for name in ("catalog", "input", "warm_input", "small_input")
}

PARQUET = "Spark's parquet sink"
ICEBERG = "Iceberg's streaming sink"
DATA_SOURCE = "eosink-iceberg, data source"
FOREACH_BATCH = "eosink-iceberg, foreachBatch"
#: The child's name of each path.
PATHS = {PARQUET: "parquet", ICEBERG: "iceberg", DATA_SOURCE: "ds", FOREACH_BATCH: "fb"}
HISTORY_PATHS = (ICEBERG, DATA_SOURCE, FOREACH_BATCH)
#: The child's time limit: a JVM's start, then these per input row of a timed run and per
#: small batch of a history (several times what a loaded 2-core machine needs): a hang guard.
START_LIMIT_S = 900
ROW_LIMIT_S = 20e-6
SMALL_BATCH_LIMIT_S = 10


class Steps(Protocol):
    def step(self, message: str) -> None:
        ...


def catalog_properties(folder: str) -> dict[str, str]:
    """pyiceberg's SQL catalog on a SQLite file in ``folder``, its warehouse beside it."""
    return {
        "type": "sql",
        "uri": f"sqlite:///{folder}/catalog.db",
        "warehouse": f"file://{folder}/warehouse",
    }


def spark_session_conf(folder: str) -> dict[str, str]:
    """Iceberg's runtime on the catalog of :func:`catalog_properties`: its SQL extensions and the
    catalog ``eosink``, Iceberg's JDBC catalog on the same SQLite file."""
    prefix = f"spark.sql.catalog.{SPARK_CATALOG}"
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": f"jdbc:sqlite:{folder}/catalog.db",
        f"{prefix}.warehouse": f"file://{folder}/warehouse",
        # pyiceberg's SQL catalog has the column of views (iceberg_type): the schema's V1
        f"{prefix}.jdbc.schema-version": "V1",
        # eosink commits behind the runtime's back: each read loads the table anew
        f"{prefix}.cache-enabled": "false",
    }


def median_ms(values: tuple[float, ...]) -> float:
    return statistics.median(values) if values else float("nan")


@attrs.frozen
class Result:
    """What the child measured, as plain data: seconds of each throughput run by path, the
    history's ``addBatch`` ms by path, batch by batch."""

    batches: int
    rows: int
    repeat: int
    warm: bool
    small_batches: int
    seconds: dict[str, tuple[float, ...]]
    add_batch_ms: dict[str, tuple[float, ...]]
    snapshots: dict[str, int]  # each history table's snapshots at its end
    pyspark: str
    start_s: float  # the child's session start (the JVM's)
    total_s: float  # the whole call, input making included

    def best(self, name: str) -> float:
        return min(self.seconds[name])

    def speed(self, name: str, anchor: str) -> float:
        """``name``'s throughput over ``anchor``'s, best runs (above 1: ``name`` is faster)."""
        return self.best(anchor) / self.best(name)

    @property
    def window(self) -> int:
        return min(WINDOW, max(1, self.small_batches // 2))

    def first_ms(self, name: str) -> float:
        return median_ms(self.add_batch_ms[name][: self.window])

    def last_ms(self, name: str) -> float:
        return median_ms(self.add_batch_ms[name][-self.window :])

    def growth(self, name: str) -> float:
        return self.last_ms(name) / self.first_ms(name)


def scenarios(repeat: int, warm: bool) -> list[str]:
    """Warm-ups, then ``repeat`` rounds of every path, each round starting one path later,
    then the histories."""
    paths = list(PATHS.values())
    names = [f"warm:{p}" for p in paths] if warm else []
    for n in range(repeat):
        turned = paths[n % len(paths) :] + paths[: n % len(paths)]
        names += [f"throughput:{n}:{p}" for p in turned]
    return names + [f"history:{PATHS[name]}" for name in HISTORY_PATHS]


def time_limit(rows: int, repeat: int, small_batches: int) -> float:
    timed = rows * len(PATHS) * (repeat + 1) * ROW_LIMIT_S
    return START_LIMIT_S + timed + small_batches * len(HISTORY_PATHS) * SMALL_BATCH_LIMIT_S


def run(
    work: str,
    batches: int,
    rows: int,
    repeat: int,
    warm: bool,
    small_batches: int,
    progress: Steps,
) -> Result:
    """Every scenario in one child process on Spark 4.1.4; its figures."""
    from eosink_files_benchmarks.throughput import make_input

    from eosink.testing.spark_child import run_scenarios, scenario

    from eosink_iceberg_benchmarks import reference_child

    began = time.monotonic()
    os.makedirs(work, exist_ok=True)
    catalog = os.path.join(work, "catalog")
    os.makedirs(os.path.join(catalog, "warehouse"), exist_ok=True)
    inputs = {
        "input": (batches, rows),
        "warm_input": (2, min(rows, WARM_ROWS)),
        "small_input": (small_batches, SMALL_ROWS),
    }
    progress.step(f"writing the input: {batches} x {rows:,} rows, {small_batches} small files")
    conf = {**spark_session_conf(catalog), SETTINGS["catalog"]: catalog}
    for name, (files, per_file) in inputs.items():
        folder = os.path.join(work, name)
        make_input(folder, files, per_file)
        conf[SETTINGS[name]] = folder
    names = scenarios(repeat, warm)
    progress.step(
        f"Spark {SPARK_VERSION}: {len(PATHS)} paths x {repeat} rounds"
        f"{' after a warm-up' if warm else ''}, then {small_batches} small batches through "
        f"{len(HISTORY_PATHS)} paths"
    )
    runs = run_scenarios(
        reference_child.__file__,
        SPARK_VERSION,
        names,
        work,
        jar_sets=["iceberg"],
        conf=conf,
        timeout_s=time_limit(batches * rows, repeat, small_batches),
    )
    seconds: dict[str, list[float]] = {name: [] for name in PATHS}
    add_batch, snapshots = {}, {}
    for name, path in PATHS.items():
        for n in range(repeat):
            seconds[name].append(scenario(runs, f"throughput:{n}:{path}")["elapsed_s"])
        if warm:
            scenario(runs, f"warm:{path}")
    for name in HISTORY_PATHS:
        history = scenario(runs, f"history:{PATHS[name]}")
        if len(history["add_batch_ms"]) != small_batches:
            raise AssertionError(
                f"{name}: {len(history['add_batch_ms'])} batches ran, not {small_batches}"
            )
        add_batch[name] = tuple(history["add_batch_ms"])
        snapshots[name] = history["snapshots"]
    return Result(
        batches=batches,
        rows=rows,
        repeat=repeat,
        warm=warm,
        small_batches=small_batches,
        seconds={name: tuple(s) for name, s in seconds.items()},
        add_batch_ms=add_batch,
        snapshots=snapshots,
        pyspark=runs["pyspark"],
        start_s=runs["start_s"],
        total_s=time.monotonic() - began,
    )
