"""Section 5: recovery after SIGKILL, eosink-files and eosink-delta vs Spark's own file sink.

A cycle: one process runs a query per sink (each its own file source, one input file per
micro-batch, output and checkpoint) until every output's log holds two batches, and is killed
with SIGKILL (the Python driver and its JVM). Then, per sink, a new process restarts that
sink's query from its checkpoint, alone on the machine's cores. Measured: from the restarted
process' start, and from its query's ``start()`` call, to the first batch the restarted query
adds to its log. The watcher reads each sink's own log: ``_spark_metadata`` (Spark's sink and
eosink-files, which writes Spark's manifest format) or ``_delta_log`` (eosink-delta: one
version per batch). The killed run is the cycle's warm-up (disk cache, checkpoints); every
restarted process starts cold, as a real restart does.

The child: ``python -m eosink_benchmarks.recovery <folder> <sink> [<sink> ...]``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import attrs

from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table
from eosink_benchmarks.timing import Timings

SINKS = {
    "files": "eosink-files, foreachBatch",
    "delta": "eosink-delta, foreachBatch",
    "spark": "Spark's parquet sink",
}
#: Each sink's log in its output folder: one numbered entry per committed batch.
LOGS = {"files": "_spark_metadata", "delta": "_delta_log", "spark": "_spark_metadata"}
TIMEOUT_S = 600
STARTED = "started"  # the child writes its query's start() time here


@attrs.frozen
class Recovery:
    sink: str
    from_process: Timings
    from_query: Timings


def committed(folder: str) -> int:
    """The latest entry of the output's log (-1: none); the sink is the folder's name."""
    try:
        names = os.listdir(os.path.join(folder, "out", LOGS[os.path.basename(folder)]))
    except FileNotFoundError:
        return -1
    ids = [int(n.split(".")[0]) for n in names if n.split(".")[0].isdigit()]
    return max(ids, default=-1)


def spawn(folder: str, sinks: list[str], log: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen(
        [sys.executable, "-m", "eosink_benchmarks.recovery", folder, *sinks],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(folder, log), "w"),  # noqa: SIM115
        start_new_session=True,
    )


def wait_for(child: subprocess.Popen, above: dict[str, int]) -> dict[str, float]:
    """Wait until the log of each folder holds a batch above its number; when each was seen."""
    deadline = time.monotonic() + TIMEOUT_S
    seen: dict[str, float] = {}
    while len(seen) < len(above):
        for folder, batch in above.items():
            if folder not in seen and committed(folder) > batch:
                seen[folder] = time.time()
        if child.poll() is not None:
            raise RuntimeError(
                f"the query ended (exit {child.returncode}); see the logs in {above}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"no new batch in {TIMEOUT_S} s; see the logs in {above}")
        time.sleep(0.02)
    return seen


def kill(child: subprocess.Popen) -> None:
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()


def cycle(folder: str, files: int, rows: int, together: bool) -> dict[str, tuple[float, float]]:
    """One kill and restart: per sink, seconds from the process' and from the query's start.

    ``together``: one restarted process for all sinks (their queries share its cores), else
    one process per sink, one after the other.
    """
    from eosink_files_benchmarks import throughput as files_throughput

    subs = {sink: os.path.join(folder, sink) for sink in SINKS}
    for sub in subs.values():
        files_throughput.make_input(os.path.join(sub, "in"), files, rows)
    killed = spawn(folder, list(SINKS), "killed.log")
    try:
        wait_for(killed, {sub: 0 for sub in subs.values()})  # two batches committed in each
    finally:
        kill(killed)
    took = {}
    for group in [list(SINKS)] if together else [[sink] for sink in SINKS]:
        before = {subs[sink]: committed(subs[sink]) for sink in group}
        for sink in group:
            os.remove(os.path.join(subs[sink], STARTED))
        began = time.time()
        restarted = spawn(folder, group, f"restarted-{'-'.join(group)}.log")
        try:
            seen = wait_for(restarted, before)
        finally:
            kill(restarted)
        for sink in group:
            with open(os.path.join(subs[sink], STARTED)) as f:
                started = float(f.read())
            took[sink] = (seen[subs[sink]] - began, seen[subs[sink]] - started)
    return took


def run(
    work: str, cycles: int, files: int, rows: int, together: bool, progress: Progress
) -> list[Recovery]:
    process: dict[str, list[float]] = {sink: [] for sink in SINKS}
    query: dict[str, list[float]] = {sink: [] for sink in SINKS}
    for n in range(cycles):
        progress.step(f"kill and restart {n + 1}/{cycles}")
        took = cycle(os.path.join(work, str(n)), files, rows, together)
        for sink, (from_process, from_query) in took.items():
            process[sink].append(from_process)
            query[sink].append(from_query)
    return [
        Recovery(label, Timings(label, tuple(process[sink])), Timings(label, tuple(query[sink])))
        for sink, label in SINKS.items()
    ]


def table(results: list[Recovery], cycles: int, rows: int, together: bool) -> Table:
    spark = next(r for r in results if r.sink == SINKS["spark"])
    body = tuple(
        (
            r.sink,
            f"{r.from_process.best:.1f} / {r.from_process.median:.1f}",
            f"{r.from_query.best:.1f} / {r.from_query.median:.1f}",
            f"{spark.from_process.best / r.from_process.best:.2f}x",
            f"{spark.from_query.best / r.from_query.best:.2f}x",
        )
        for r in results
    )
    how = (
        "every sink's query restarted in one process, sharing its cores"
        if together
        else "each sink's query restarted alone in its own process"
    )
    return Table(
        f"Recovery after SIGKILL: restart to the first committed batch, best / median of {cycles}",
        (
            "sink",
            "from process start, s",
            "from query start(), s",
            "vs Spark's sink (process)",
            "vs Spark's sink (query)",
        ),
        body,
        (
            f"Micro-batches of {rows:,} rows (one input file each); {how}. The process time "
            "includes the JVM's start, the query time the checkpoint's recovery, the re-run or "
            "skip of the batch in flight at the kill, and the next batch. Above 1.00x: faster.",
        ),
    )


def child(folder: str, sinks: list[str]) -> None:
    """The queries of a cycle (one per sink); run until killed."""
    from eosink_files_benchmarks import throughput as files_throughput

    import eosink
    from eosink.testing.spark import local_spark
    from eosink_delta.sink import DeltaSink
    from eosink_files.sink import FilesSink

    spark = local_spark(cores=2, **{"spark.ui.showConsoleProgress": "false"})
    queries = []
    for sink in sinks:
        sub = os.path.join(folder, sink)
        writer = files_throughput.stream(spark, os.path.join(sub, "in")).writeStream.option(
            "checkpointLocation", os.path.join(sub, "ckpt")
        )
        out = os.path.join(sub, "out")
        if sink == "files":
            writer = writer.foreachBatch(
                eosink.foreach_batch(FilesSink(path=out), writer_id="bench")
            )
        elif sink == "delta":
            writer = writer.foreachBatch(
                eosink.foreach_batch(DeltaSink(path=out), writer_id="bench")
            )
        else:
            writer = writer.format("parquet").option("path", out)
        with open(os.path.join(sub, STARTED), "w") as f:
            f.write(repr(time.time()))
        queries.append(writer.start())
    spark.streams.awaitAnyTermination()


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2:])
