"""eosink-postgres in the report: throughput beside Spark's JDBC writer and a bare COPY loop
(section 1), the exactly-once overhead of a batch (section 2), the cost as the history grows
(section 3).

Each runs the package's own benchmark (``eosink_postgres_benchmarks.throughput``,
``eosink_postgres_benchmarks.history``) against a PostgreSQL server of its own
(``eosink.testing.postgres``: the machine's binaries, loopback). The JDBC anchor needs the
PostgreSQL JDBC driver jar, found as the benchmark script finds it (the local Maven cache);
without one the JDBC row and its target say so.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

from eosink_postgres_benchmarks import history as postgres_history
from eosink_postgres_benchmarks import streams as postgres_streams
from eosink_postgres_benchmarks import throughput as postgres_throughput

from eosink_benchmarks.overhead import Overhead, plain_rows
from eosink_benchmarks.overhead import measure as measure_overhead
from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio

JDBC_TARGET = 2.0  # eosink-postgres >= 2x Spark's JDBC writer
COPY_TARGET = 0.8  # eosink-postgres >= 0.8x the bare COPY loop
HISTORY_LIMIT = 1.5  # the report's flatness rule (section 3)
DOORS = (postgres_streams.EOSINK_DS, postgres_streams.EOSINK_FB)


def throughput(
    work: str, batches: int, rows: int, repeat: int, warm: bool, cores: int, progress: Progress
) -> tuple[list[Table], list[Target]]:
    """The stream through both doors, the bare COPY loop and Spark's JDBC writer."""
    if postgres_throughput.find_jdbc_jar() is None:
        print(postgres_throughput.missing_jar_note(), file=sys.stderr, flush=True)
    progress.step(f"eosink-postgres, Spark JDBC, bare COPY: {repeat} rounds")
    r = run_throughput(work, batches, rows, repeat, warm, cores)
    return [throughput_table(r, batches, rows, repeat)], throughput_targets(r)


def run_throughput(
    work: str, batches: int, rows: int, repeat: int, warm: bool, cores: int
) -> postgres_throughput.Results:
    """Runs the benchmark as its own process: the JDBC driver jar must be on the classpath of
    the JVM it starts, which a JVM the report started earlier (section 1's) would not have."""
    os.makedirs(work, exist_ok=True)
    out = os.path.join(work, "results.json")
    command = [
        sys.executable,
        *("-m", postgres_throughput.__name__),
        *("--rows", str(rows), "--batches", str(batches), "--repeat", str(repeat)),
        *("--cores", str(cores), "--workdir", work, "--json", out),
        *(() if warm else ("--no-warm",)),
    ]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    log = os.path.join(work, "postgres_throughput.log")
    with open(log, "w") as f:
        done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=f)
    if done.returncode:
        with open(log) as f:
            tail = "".join(f.readlines()[-40:])
        raise RuntimeError(f"the postgres throughput benchmark failed ({done.returncode}):\n{tail}")
    with open(out) as f:
        return postgres_throughput.Results(**json.load(f))


def throughput_table(r: postgres_throughput.Results, batches: int, rows: int, repeat: int) -> Table:
    body = []
    for name in r.seconds:
        jdbc = r.ratio(name, postgres_streams.JDBC, r.best)
        copy = r.ratio(name, postgres_streams.BARE_COPY, r.best)
        body.append(
            (
                name,
                f"{r.best(name):.2f}",
                f"{r.median(name):.2f}",
                f"{r.total / r.best(name):,.0f}",
                ratio(jdbc),
                ratio(copy),
                ", ".join(f"{x:.1f}" for x in r.loads[name]),
            )
        )
    notes = [
        "Spark JDBC: `df.write.jdbc` in foreachBatch (each partition commits on its own: "
        "at-least-once). Bare COPY loop: the same Arrow batches COPYed straight into the target "
        "with the sink's encoder, no staging, no proof (at-least-once). eosink-postgres adds the "
        "staging tables and the commit that moves their rows and writes the proof.",
    ]
    if r.note:
        notes.append(r.note)
    if r.driver_ms:
        notes.append(
            f"Exactly-once driver time per batch (foreachBatch): median "
            f"{statistics.median(r.driver_ms):.1f} ms, of which the commit "
            f"{statistics.median(r.commit_ms):.1f} ms (it moves the batch's rows from staging "
            "into the target: O(batch))."
        )
    return Table(
        f"Throughput into PostgreSQL, {batches} x {rows:,} rows x 5 columns, best of {repeat}",
        (
            "path",
            "best s",
            "median s",
            "rows/s (best)",
            "vs Spark JDBC",
            "vs bare COPY",
            "load per round",
        ),
        tuple(body),
        tuple(notes),
    )


def throughput_targets(r: postgres_throughput.Results) -> list[Target]:
    targets = []
    for door in DOORS:
        jdbc = r.ratio(door, postgres_streams.JDBC, r.best)
        copy = r.ratio(door, postgres_streams.BARE_COPY, r.best)
        targets.append(
            Target(
                "1b. throughput into PostgreSQL",
                f"{door} vs Spark JDBC",
                f">= {JDBC_TARGET:.1f}x",
                ratio(jdbc) if jdbc is not None else "no JDBC jar",
                None if jdbc is None else jdbc >= JDBC_TARGET,
            )
        )
        targets.append(
            Target(
                "1b. throughput into PostgreSQL",
                f"{door} vs bare COPY loop",
                f">= {COPY_TARGET:.1f}x",
                ratio(copy),
                copy is not None and copy >= COPY_TARGET,
            )
        )
    return targets


def overhead(work: str, batches: int, progress: Progress) -> Overhead:
    """``is_committed`` + ``commit`` of ``batches`` batches (after one warm-up), the same
    batches and timer as every other sink of section 2."""
    from eosink_postgres.sink import PostgresSink

    from eosink.testing.postgres import postgres_server_running

    progress.step(f"eosink-postgres: 1 warm-up + {batches} batches")
    with postgres_server_running() as server:
        sink = PostgresSink(url=server.url(), table="public.overhead")
        return measure_overhead("eosink-postgres", sink, plain_rows, batches)


def history(sizes: list[int], batches: int, progress: Progress) -> tuple[list[Table], list[Target]]:
    """The driver's cost per batch after a history of each of ``sizes`` batches."""
    from eosink.testing.postgres import postgres_server_running

    progress.step(f"eosink-postgres at batches {sizes}, interleaved")
    with postgres_server_running() as server:
        spent = postgres_history.measure_at(server.url(), sizes, batches)
    medians = {size: statistics.median(spent[size]) * 1000 for size in sizes}
    first = medians[sizes[0]]
    table = Table(
        f"eosink-postgres: per-batch driver cost (is_committed + init + commit) as the history "
        f"grows, median of {batches}",
        ("batch", "ms", "vs first"),
        tuple((f"{size:,}", f"{ms:.1f}", ratio(ms / first)) for size, ms in medians.items()),
        (
            "2 partitions x 100 rows a batch, one writer. The history before each point is "
            "synthesized (the proofs and the progress row of that many batches, in SQL); every "
            "lookup is on the proofs' primary key (target_oid, writer_id, batch_id). "
            f"load average after: {os.getloadavg()[0]:.1f}",
        ),
    )
    last = sizes[-1]
    targets = [
        Target(
            "3. history",
            f"eosink-postgres: batch {last:,} vs batch {sizes[0]:,}",
            f"<= {HISTORY_LIMIT:.1f}x",
            ratio(medians[last] / first),
            medians[last] / first <= HISTORY_LIMIT,
        )
    ]
    return [table], targets
