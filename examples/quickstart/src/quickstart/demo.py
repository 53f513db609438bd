"""eosink quickstart: kill a streaming job twice, restart it, and count what Spark reads back.

    ./pants run examples/quickstart:demo            # or: python -m quickstart.demo

1. writes a generated source: 6 Parquet files of 50,000 rows, one per micro-batch;
2. run 1: the job (a local Spark streaming query writing through eosink into ``output/``) is
   killed with SIGKILL in the middle of batch 2, its part files half written;
3. run 2: restarted from its checkpoint, Spark replays batch 2; the job is killed again right
   after committing batch 4, before Spark records it;
4. run 3: restarted, Spark replays batch 4, which eosink skips (already committed), and
   finishes; Spark's own reader reads the folder back.

It prints the batches committed and skipped per run, rows in vs rows read back by Spark's
reader, duplicates and losses.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FILES = 6
ROWS_PER_FILE = 50_000
TIMEOUT_S = 600


def generate_source(folder: str) -> int:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(7)
    for n in range(FILES):
        ids = np.arange(n * ROWS_PER_FILE, (n + 1) * ROWS_PER_FILE, dtype=np.int64)
        table = pa.table(
            {
                "id": ids,
                "user": pa.array([f"user-{i % 997}" for i in ids.tolist()]),
                "amount": rng.uniform(1, 500, len(ids)).round(2),
                "ts": pa.array(
                    (1_700_000_000_000_000 + ids * 1_000_000).astype("datetime64[us]"),
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        )
        pq.write_table(table, os.path.join(folder, f"orders-{n:03d}.parquet"))
    return FILES * ROWS_PER_FILE


def run_job(workdir: str, number: int, kill: str | None, read_back: bool = False) -> str:
    """Run the job in a child process; with ``kill``, SIGKILL it once it reaches that point."""
    cmd = [sys.executable, "-m", "quickstart.job", workdir]
    if kill:
        cmd += ["--kill", kill]
    if read_back:
        cmd += ["--read-back"]
    marker = os.path.join(workdir, "frozen-" + kill.replace(":", "-")) if kill else None
    log_path = os.path.join(workdir, f"run-{number}.log")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    with open(log_path, "w") as log:
        child = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        deadline = time.monotonic() + TIMEOUT_S
        try:
            while child.poll() is None and time.monotonic() < deadline:
                if marker and os.path.exists(marker):
                    os.killpg(child.pid, signal.SIGKILL)  # the Python driver and its JVM
                    child.wait()
                    return "killed"
                time.sleep(0.1)
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    if child.returncode != 0:
        with open(log_path) as f:
            tail = f.read()[-3000:]
        raise SystemExit(
            f"run {number} of the job failed (exit {child.returncode}); log {log_path}:\n{tail}"
        )
    return "finished"


def read_events(workdir: str, seen: int) -> tuple[list[dict], int]:
    path = os.path.join(workdir, "events.jsonl")
    if not os.path.exists(path):
        return [], seen
    with open(path) as f:
        lines = f.read().splitlines()
    return [json.loads(line) for line in lines[seen:]], len(lines)


def ids(events: list[dict], status: str) -> str:
    found = sorted(e["batch"] for e in events if e["status"] == status)
    return ", ".join(map(str, found)) or "-"


def table(rows: list[tuple[str, ...]], header: tuple[str, ...]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)
    fmt = lambda r: "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([fmt(header), line, *map(fmt, rows)])


def check_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (
        java_home and os.path.exists(os.path.join(java_home, "bin", "java"))
    ):
        raise SystemExit(
            "the quickstart runs a local Spark, which needs Java 17 or newer: install a JDK "
            "(e.g. `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME"
        )


def print_summary(
    workdir: str, runs: list, rows_in: int, back: dict, leftovers: int, started: float
) -> bool:
    """Print what each run did and the read-back's counts; whether the output is exactly once."""
    print()
    print(table(runs, ("run", "what happened", "batches committed", "batches skipped")))
    print()
    print(
        table(
            [
                ("rows in (source)", f"{rows_in:,}"),
                ("rows read back by Spark's reader", f"{back['rows_read']:,}"),
                ("duplicates", f"{back['duplicates']:,}"),
                ("lost", f"{back['lost']:,}"),
                (
                    "files of killed attempts on disk",
                    f"{leftovers} (not in the manifest, so never read)",
                ),
            ],
            ("check", "result"),
        )
    )
    print()
    print(
        f"output: {workdir}/output   read it with spark.read.parquet(...) or "
        "eosink_files.read_table(...)"
    )
    print(
        "remove the killed attempts' files: "
        f"eosink cleanup files {workdir}/output --older-than 0s --delete"
    )
    print(f"took {time.monotonic() - started:.0f} s")
    ok = back["duplicates"] == 0 and back["lost"] == 0 and back["rows_read"] == rows_in
    print("exactly once: " + ("yes" if ok else "NO"))
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quickstart", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workdir",
        help="folder for input, output and checkpoint (default: a new temporary folder)",
    )
    args = parser.parse_args(argv)
    check_java()
    workdir = (
        os.path.abspath(args.workdir)
        if args.workdir
        else tempfile.mkdtemp(prefix="eosink-quickstart-")
    )
    if os.path.exists(os.path.join(workdir, "checkpoint")):
        raise SystemExit(f"{workdir} holds a previous run; give an empty --workdir or none")
    os.makedirs(workdir, exist_ok=True)
    started = time.monotonic()
    print(f"eosink quickstart in {workdir}")
    rows_in = generate_source(os.path.join(workdir, "input"))
    print(f"source: {FILES} Parquet files x {ROWS_PER_FILE:,} rows, one file per micro-batch")

    plan = [
        ("mid-write:2", "killed (SIGKILL) in the middle of batch 2", False),
        ("after-commit:4", "restarted; killed right after committing batch 4", False),
        (None, "restarted; ran to the end", True),
    ]
    runs, seen = [], 0
    for number, (kill, story, read_back) in enumerate(plan, start=1):
        print(f"run {number}: starting the streaming job ...", flush=True)
        how = run_job(workdir, number, kill, read_back)
        events, seen = read_events(workdir, seen)
        runs.append(
            (
                str(number),
                story if how == "killed" or not kill else story + " (not killed)",
                ids(events, "committed"),
                ids(events, "skipped"),
            )
        )

    with open(os.path.join(workdir, "readback.json")) as f:
        back = json.load(f)
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    from eosink_files import cleanup

    leftovers = cleanup(os.path.join(workdir, "output"), older_than_s=0, dry_run=True)
    ok = print_summary(workdir, runs, rows_in, back, len(leftovers.removable), started)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
