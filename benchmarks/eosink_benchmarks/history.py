"""Section 3: the driver's per-batch cost as the history grows, eosink-files and eosink-delta.

Both curves come from the packages' own benchmarks:
``eosink_files_benchmarks.log_cost.history`` (sink-files: a ``_spark_metadata`` log synthesized
at each batch, 100 ms trigger) and ``eosink_delta_benchmarks.history.measure`` (sink-delta: a
table with that many commits and files, checkpoints where delta-rs writes them). In both the
first batch of a process is the warm-up and is shown apart; the medians are of the batches after it.
"""

from __future__ import annotations

import os
from typing import Any

from eosink_delta_benchmarks import history as delta_history
from eosink_files_benchmarks import log_cost

from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio

LIMIT = 1.5
TRIGGER_S = 0.1

#: Why Spark's own file sink has no curve here.
SPARK_CURVE = (
    "Spark's own file sink: no curve. Its sink skips every batch at or below the latest batch "
    "of its log, so measuring it at batch N needs a query checkpoint at batch N as well (offsets, "
    "commits and the file source's own log), which Spark offers no way to synthesize; running "
    "100k real batches is out of reach. Its log is the same format eosink-files writes and "
    "compacts every 10 batches the same way."
)


def run(
    work: str, sizes: list[int], batches: int, progress: Progress
) -> dict[str, list[dict[str, Any]]]:
    progress.step(f"eosink-files at batches {sizes}")
    files = log_cost.history(os.path.join(work, "files"), sizes, batches + 1, TRIGGER_S)
    delta = []
    for size in sizes:
        progress.step(f"eosink-delta at batch {size:,}")
        delta.append(delta_history.measure(os.path.join(work, "delta"), size, batches))
    return {"files": files, "delta": delta}


def curves(results: dict[str, list[dict[str, Any]]]) -> dict[str, list[tuple[int, float]]]:
    """name -> [(batch, median ms)] of every curve."""
    return {
        "eosink-files": [(r["at"], r["median_ms"]) for r in results["files"]],
        "eosink-delta, log retained": [(r["size"], r["retained_kept"]) for r in results["delta"]],
        "eosink-delta, log cleaned": [(r["size"], r["cleaned_kept"]) for r in results["delta"]],
    }


def table(results: dict[str, list[dict[str, Any]]], batches: int) -> Table:
    files = {r["at"]: r for r in results["files"]}
    delta = {r["size"]: r for r in results["delta"]}
    lines = curves(results)
    body = []
    for batch in sorted(files):
        cells = [f"{batch:,}"]
        for name, points in lines.items():
            base, value = points[0][1], dict(points)[batch]
            cells += [f"{value:.1f}", ratio(value / base)]
        cells += [f"{files[batch]['cold_ms']:.1f}", f"{delta[batch]['retained_first']:.1f}"]
        body.append(tuple(cells))
    header = ["batch"]
    for name in lines:
        header += [f"{name} ms", "vs first"]
    header += ["files: first batch ms", "delta: first batch ms"]
    return Table(
        "Per-batch driver cost (is_committed + init + commit) as the history grows, "
        f"median of {batches}",
        tuple(header),
        tuple(body),
        (
            "eosink-files: 2 files a batch, 100 ms trigger, the files the cleanup delay keeps "
            "in the log. eosink-delta: one commit and one file per batch; retained = every commit "
            "file still in _delta_log, cleaned = history older than the log retention, cleaned at "
            "a checkpoint. First batch = a fresh process's first (it loads the log or table).",
            "",
            "eosink-delta commits its appends itself and keeps its own view of the log "
            "(sink-delta README, 'A long history'): a batch makes the same requests at batch "
            "100,000 as at batch 10 and lists nothing (tests/test_commit_requests.py counts "
            "them). Its figures are about a millisecond at either end; what moves them is the "
            "machine, and in the cleaned column the file system: a directory emptied of 100,000 "
            "log files does not shrink (bounded by the directory's largest size; no such cost "
            "on object stores). eosink-files reads only the latest compact once per process "
            "and lists the log once per batch; its compaction every 10th batch copies the file "
            "list (the log_cost benchmark's compaction column).",
            "",
            SPARK_CURVE,
        ),
    )


def targets(results: dict[str, list[dict[str, Any]]]) -> list[Target]:
    found = []
    for name, points in curves(results).items():
        (first, base), (last, value) = points[0], points[-1]
        found.append(
            Target(
                "3. history",
                f"{name}: batch {last:,} vs batch {first:,}",
                f"<= {LIMIT:.1f}x",
                ratio(value / base),
                value / base <= LIMIT,
            )
        )
    return found
