"""The YT sinks against the YT proxy emulator, from the packages' own benchmarks.

Section 1c (:func:`throughput`): each YT sink through both doors on a Spark stream beside its
bare client loop (``eosink_yt_static_benchmarks.streams``, ``eosink_yt_dynamic_benchmarks.streams``,
an emulator process). Section 4: yt-static's commit cost as the table grows and yt-dynamic next
to a bare ``insert_rows`` loop without Spark (``eosink_yt_static_benchmarks.writes.append_costs``,
``eosink_yt_dynamic_benchmarks.writes.measure``, the emulator in process).
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
from typing import Any

import structlog
from eosink_files_benchmarks import throughput as files_throughput
from eosink_yt_dynamic_benchmarks import streams as dynamic_streams
from eosink_yt_dynamic_benchmarks import writes as dynamic_writes
from eosink_yt_emulator.server import EmulatorProcess
from eosink_yt_static_benchmarks import streams as static_streams
from eosink_yt_static_benchmarks import writes as static_writes

from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target, ratio
from eosink_benchmarks.timing import Timings, measure

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


#: The YT throughput section's packages: (sink, paths module, anchor's name).
STREAMS = (
    ("yt-static", static_streams, static_streams.BARE),
    ("yt-dynamic", dynamic_streams, dynamic_streams.BARE),
)


def throughput(
    spark: Any, work: str, batches: int, rows: int, repeat: int, warm: bool, progress: Progress
) -> dict[str, dict[str, Timings]]:
    """Each YT sink through both doors beside its bare client loop, on one Spark stream of
    ``batches`` x ``rows`` rows (the files benchmark's input), against an emulator process:
    sink -> path name -> timings. Every run writes tables of its own, removed after it."""
    source = os.path.join(work, "yt-in")
    progress.step(f"YT throughput: writing the input, {batches} x {rows:,} rows")
    files_throughput.make_input(source, batches, rows)
    files_throughput.make_input(source + "-warm", 1, min(rows, 10_000))
    emulator = EmulatorProcess().start()
    logging.getLogger("Yt").setLevel(logging.WARNING)  # the client's per-operation lines
    try:
        config = emulator.client_config(**dynamic_writes.PATIENT)
        client = emulator.client(**dynamic_writes.PATIENT)
        results = {}
        for sink, module, _ in STREAMS:
            progress.step(f"YT throughput: {sink}")

            def runner(name: str, module: Any = module, sink: str = sink) -> Any:
                def run(label: str) -> None:
                    folder = os.path.join(work, f"{sink}-{label}")
                    node = f"//bench/{sink}-{label}"
                    client.create("map_node", node, recursive=True)
                    now = source if label != "warm" else source + "-warm"
                    frame = lambda: files_throughput.stream(spark, now)  # noqa: E731
                    start = module.paths(frame, emulator.url, config, folder, f"{node}/t")[name]
                    query = start()
                    query.awaitTermination()
                    if query.exception():
                        raise RuntimeError(f"{name}: {query.exception()}")
                    drop(client, node)
                    shutil.rmtree(folder, ignore_errors=True)

                return run

            results[sink] = measure({n: runner(n) for n in module.NAMES}, repeat, progress, warm)
        return results
    finally:
        emulator.stop()


def drop(client: Any, node: str) -> None:
    """Remove a run's folder (its dynamic tables unmounted first, as YT requires)."""
    for child in client.list(node, attributes=["dynamic"]):
        if child.attributes.get("dynamic"):
            client.unmount_table(f"{node}/{child}", sync=True)
    client.remove(node, recursive=True, force=True)


def throughput_table(
    results: dict[str, dict[str, Timings]], batches: int, rows: int, repeat: int
) -> Table:
    total = batches * rows
    body = []
    for sink, _, bare_name in STREAMS:
        bare = results[sink][bare_name]
        for name, t in results[sink].items():
            body.append(
                (
                    name,
                    f"{total / t.best:,.0f}",
                    f"{t.best:.1f} / {t.median:.1f}",
                    ratio(t.spread),
                    ratio(bare.best / t.best),
                )
            )
    return Table(
        f"Throughput into YT: {batches} x {rows:,} rows x 5 columns (emulator process)",
        ("path", "rows/s (best)", "seconds best / median", "spread (worst / best)", "vs bare loop"),
        tuple(body),
        (
            f"Best of {repeat}, runs interleaved. The bare loops write the same rows from the "
            "same Spark tasks with the same client and the same row conversion, with no "
            "protocol; the emulator is one Python process on the same cores, so both sides "
            "are bounded by it.",
        ),
    )
