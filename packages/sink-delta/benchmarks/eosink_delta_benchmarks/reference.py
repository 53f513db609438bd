"""eosink-delta beside Delta's own streaming sink (delta-spark 4.4 on Spark 4.2), on one stream.

Delta's sink is what a Delta user has without eosink, so it is the anchor that says what
eosink-delta's exactly-once costs against the engine's own. Delta 4.4 runs on Spark 4.2, not on
the project's pyspark: every run happens in one child process of that Spark (one JVM, one
session with Delta's jars and its SQL extension and catalog; see
:mod:`eosink_delta_benchmarks.reference_child`), and this module hands back what it measured
as plain values (the report's tables are made by ``eosink_benchmarks.delta_reference``):

* throughput: the report's stream into Spark's parquet sink, Delta's streaming sink and
  eosink-delta's two doors, best of ``repeat`` interleaved rounds after one warm-up of each;
* history: ``small_batches`` tiny micro-batches into Delta's sink and eosink-delta's doors,
  Spark's ``addBatch`` time of each batch (the sink's write and commit): the first batches vs
  the last, as the table's log grows (Delta's default checkpoint every 10 commits).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Protocol

import attrs

from eosink.testing.spark_child import run_scenarios, scenario
from eosink_delta_benchmarks import reference_child as child

#: The Spark line delta-spark 4.4 is built for.
SPARK_VERSION = "4.2.0"
SPARK, DELTA = child.SPARK, child.DELTA
DATA_SOURCE, FOREACH_BATCH = child.DATA_SOURCE, child.FOREACH_BATCH
#: Batches per median of the history run (batch 0, which opens the table, is left out).
WINDOW = 10
#: Delta's partitions of a table's snapshot for the measured runs, as the project's Delta tests
#: set it (``delta_spark_process.DELTA_CONF``). Delta's default, 50, makes its sink rebuild the
#: table's state in 50 tasks at every batch, seconds a batch on local[2] (batches of 5 rows,
#: on a loaded 2-core machine: 5-9 s with 50, ~2 s with 2, ~0.6 s with 1), which would take
#: the history run far past the report's time. 0: Delta's default.
SNAPSHOT_PARTITIONS = 1
#: The child's limit: a JVM start and both runs, on a loaded machine.
TIMEOUT_S = 3600


class Steps(Protocol):
    def step(self, message: str) -> None:
        ...


@attrs.frozen
class Throughput:
    """Seconds of each measured run per path (``warm_seconds``: the warm-up runs)."""

    total: int
    seconds: dict[str, tuple[float, ...]]
    warm_seconds: dict[str, float]

    def best(self, name: str) -> float:
        return min(self.seconds[name])

    def median(self, name: str) -> float:
        return statistics.median(self.seconds[name])

    def ratio(self, name: str, base: str) -> float:
        """How much faster ``name`` is than ``base`` (best runs; above 1: faster)."""
        return self.best(base) / self.best(name)


@attrs.frozen
class History:
    """One path's per-batch milliseconds (Spark's ``addBatch``, the whole trigger), in batch
    order, and the Delta checkpoints its table had at the end."""

    add_batch_ms: tuple[float, ...]
    trigger_ms: tuple[float, ...]
    checkpoints: int
    seconds: float

    @property
    def window(self) -> int:
        """Batches per median: :data:`WINDOW`, fewer on a short run (no batch in both)."""
        return max(1, min(WINDOW, (len(self.add_batch_ms) - 1) // 2))

    def first(self, values: tuple[float, ...] | None = None) -> float:
        values = self.add_batch_ms if values is None else values
        return statistics.median(values[1 : 1 + self.window])

    def last(self, values: tuple[float, ...] | None = None) -> float:
        values = self.add_batch_ms if values is None else values
        return statistics.median(values[-self.window :])

    @property
    def growth(self) -> float:
        return self.last() / self.first()


@attrs.frozen
class Results:
    batches: int
    rows: int
    repeat: int
    warm: bool
    small_batches: int
    snapshot_partitions: int
    throughput: Throughput
    history: dict[str, History]
    pyspark: str
    #: the child's seconds: its JVM's start, the input, the checks, all of it
    start_s: float
    total_s: float
    input_s: float
    #: the read-back checks' seconds per path, every run
    checks_s: dict[str, list[float]]


def run(
    work: str,
    batches: int,
    rows: int,
    repeat: int,
    warm: bool,
    small_batches: int,
    progress: Steps | None = None,
    snapshot_partitions: int = SNAPSHOT_PARTITIONS,
) -> Results:
    """Both runs in one Spark 4.2 process; fails if any output misses a row or holds one twice.
    ``snapshot_partitions``: Delta's ``snapshotPartitions`` in the session (0: its default)."""
    os.makedirs(work, exist_ok=True)
    delta = f"snapshot_partitions={snapshot_partitions}"
    flows = f"throughput:batches={batches}:rows={rows}:repeat={repeat}:warm={int(warm)}:{delta}"
    tiny = f"history:batches={small_batches}:warm={int(warm)}:{delta}"
    if progress is not None:
        progress.step(
            f"Delta's streaming sink beside eosink-delta on Spark {SPARK_VERSION}: "
            f"{batches} x {rows:,} rows, 4 paths x {repeat} rounds"
            f"{' after a warm-up' if warm else ''}; then {small_batches} tiny batches x 3 paths"
        )
    began = time.monotonic()
    runs = run_scenarios(
        child.__file__, SPARK_VERSION, [flows, tiny], work, ["delta"], timeout_s=TIMEOUT_S
    )
    flow, history = scenario(runs, flows), scenario(runs, tiny)
    if progress is not None:
        progress.step(f"Delta reference done in {time.monotonic() - began:.0f} s")
    return Results(
        batches=batches,
        rows=rows,
        repeat=repeat,
        warm=warm,
        small_batches=small_batches,
        snapshot_partitions=snapshot_partitions,
        throughput=Throughput(
            total=batches * rows,
            seconds={name: tuple(s) for name, s in flow["runs"].items()},
            warm_seconds=flow["warm_runs"],
        ),
        history={
            name: History(
                add_batch_ms=tuple(h["add_batch_ms"]),
                trigger_ms=tuple(h["trigger_ms"]),
                checkpoints=h["checkpoints"],
                seconds=h["seconds"],
            )
            for name, h in history["paths"].items()
        },
        pyspark=runs["pyspark"],
        start_s=runs["start_s"],
        total_s=runs["total_s"],
        input_s=flow["input_s"],
        checks_s=flow["checks_s"],
    )


def main(argv: Any = None) -> None:
    """A quick look without the report: ``python -m eosink_delta_benchmarks.reference``."""
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-warm", action="store_true")
    parser.add_argument("--small-batches", type=int, default=200)
    parser.add_argument("--snapshot-partitions", type=int, default=SNAPSHOT_PARTITIONS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="eosink-delta-reference-") as work:
        r = run(
            work,
            args.batches,
            args.rows,
            args.repeat,
            not args.no_warm,
            args.small_batches,
            snapshot_partitions=args.snapshot_partitions,
        )
    for name in r.throughput.seconds:
        print(
            f"{name:28} best {r.throughput.best(name):6.1f} s  "
            f"vs Delta's sink {r.throughput.ratio(name, DELTA):5.2f}x  "
            f"vs Spark's {r.throughput.ratio(name, SPARK):5.2f}x"
        )
    for name, h in r.history.items():
        print(
            f"{name:28} addBatch ms: first {h.first():7.1f} last {h.last():7.1f} "
            f"growth {h.growth:5.2f}x  checkpoints {h.checkpoints}"
        )
    print(f"child: JVM start {r.start_s:.0f} s, all {r.total_s:.0f} s")


if __name__ == "__main__":
    main()
