"""Section 4: the YT sinks' cost as the table grows (yt-static) and next to a bare loop
(yt-dynamic), both against the in-process YT proxy emulator, from the packages' own
benchmarks (``eosink_yt_static_benchmarks.writes.append_costs``,
``eosink_yt_dynamic_benchmarks.writes.measure``).
"""

from __future__ import annotations

import logging
import statistics
from typing import Any

from eosink_yt_dynamic_benchmarks import writes as dynamic_writes
from eosink_yt_static_benchmarks import writes as static_writes
import structlog

from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio

KINDS = {
    "unsorted": "unsorted (merge-append)",
    "after": "sorted, keys after the table's (sorted-append)",
    "overlap": "sorted, keys overlap (merge)",
}
LIMIT = 1.5


def run_static(
    sizes: list[int],
    merge_sizes: list[int],
    append_rows: int,
    parts: int,
    repeats: int,
    progress: Progress,
) -> list[dict[str, Any]]:
    structlog.reset_defaults()  # the benchmark reads the sink's info events
    try:
        with static_writes.session() as bench:
            progress.step(f"yt-static warm-up: one {append_rows:,}-row append of each kind")
            static_writes.append_costs(bench, append_rows, sizes[:1], sizes[:1], parts, 1)
            progress.step(f"yt-static: appends into tables of {sizes} rows, {repeats} each")
            return static_writes.append_costs(
                bench, append_rows, sizes, merge_sizes, parts, repeats
            )
    finally:
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def run_dynamic(rows: int, parts: int, repeat: int, progress: Progress) -> dict[str, list[float]]:
    progress.step(
        f"yt-dynamic: {rows:,} rows in {parts} partitions, each variant warmed, best of {repeat}"
    )
    return dynamic_writes.measure(rows, parts, repeat)


def static_table(results: list[dict[str, Any]], append_rows: int, repeats: int) -> Table:
    body, first = [], {}
    for row in results:
        cells = [f"{row['size']:,}"]
        for kind in KINDS:
            if row[kind] is None:
                cells += ["(not run)", ""]
                continue
            ms = statistics.median(row[kind])
            first.setdefault(kind, ms)
            cells += [f"{ms:.0f}", ratio(ms / first[kind])]
        body.append(tuple(cells))
    header = ["table rows"]
    for label in KINDS.values():
        header += [f"{label} ms", "vs smallest"]
    return Table(
        f"yt-static: commit of a {append_rows:,}-row append vs the table's size, "
        f"median of {repeats} (emulator)",
        tuple(header),
        tuple(body),
        (
            "Overlapping keys merge the table with the batch (its cost grows with the table by "
            "design); it runs only on the smaller tables.",
        ),
    )


def dynamic_table(times: dict[str, list[float]], rows: int, parts: int, repeat: int) -> Table:
    bare = min(times["bare"])
    body = []
    for name, (label, _, _) in dynamic_writes.VARIANTS.items():
        best = min(times[name])
        versus = "" if name == "bare" else f"{100 * (best / bare - 1):+.1f}%"
        body.append(
            (
                label,
                f"{rows / best:,.0f}",
                f"{best:.2f} / {statistics.median(times[name]):.2f}",
                versus,
            )
        )
    return Table(
        f"yt-dynamic vs a bare insert_rows loop: {rows:,} rows in {parts} partitions, "
        f"best of {repeat} (emulator)",
        ("variant", "rows/s (best)", "seconds best / median", "time vs bare loop"),
        tuple(body),
    )


def static_targets(results: list[dict[str, Any]]) -> list[Target]:
    found = []
    for kind in ("unsorted", "after"):
        points = [(r["size"], statistics.median(r[kind])) for r in results if r[kind]]
        (first, base), (last, value) = points[0], points[-1]
        found.append(
            Target(
                "4. yt-static",
                f"{KINDS[kind]}: table of {last:,} rows vs {first:,}",
                f"<= {LIMIT:.1f}x (flat)",
                ratio(value / base),
                value / base <= LIMIT,
            )
        )
    return found
