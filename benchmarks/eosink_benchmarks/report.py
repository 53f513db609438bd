"""One report over every eosink benchmark: tables, ratios to the anchors, plots.

    ./pants run benchmarks:report -- --size smoke --out /tmp/report    # minutes: checks it runs
    ./pants run benchmarks:report -- --size full --out /tmp/report     # the figures (hours)

Runs the packages' own benchmarks at one size, with one rule (every path warmed once in the
same session; best of N and median printed), prints every table, and writes ``report.md`` and
the PNG plots into ``--out``. Sections: 1 throughput on one stream (1d: keyed upserts beside
each sink's own upsert; 1e: the stream on S3), 2 exactly-once overhead per batch, 3 cost as the
history grows, 4 the YT sinks' cost as the table grows, 5 recovery after SIGKILL, 6 eosink
beside Delta's and Iceberg's own streaming sinks on the Spark each is built for. Each target of
the report is checked and a missed one is said so.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import attrs
import structlog

from eosink_benchmarks import (
    delta_reference,
    kept,
    history,
    iceberg,
    iceberg_reference,
    machine,
    overhead,
    plots,
    postgres,
    recovery,
    s3,
    throughput,
    upsert,
    yt,
)
from eosink_benchmarks.kept import Kept
from eosink_benchmarks.load import Load, LoadWatch
from eosink_benchmarks.progress import Progress
from eosink_benchmarks.tables import Table, Target


@attrs.frozen
class Size:
    """How big every section runs."""

    batches: int  # throughput: micro-batches of the stream
    rows: int  # throughput: rows per micro-batch
    repeat: int  # throughput, yt-dynamic: best of this many
    warm: bool  # throughput: warm every path up first (off only where figures mean nothing)
    pg_batches: int  # throughput into PostgreSQL: micro-batches
    pg_rows: int  # throughput into PostgreSQL: rows per micro-batch
    yt_batches: int  # throughput into YT (the emulator): micro-batches
    yt_rows: int  # throughput into YT: rows per micro-batch
    s3_rows: int  # throughput on S3 (the loopback server): rows per micro-batch
    upsert_batches: int  # keyed upserts: batches of the change feed (the table grows ~20x
    upsert_rows: int  # after batch 10 at 240); rows per batch
    upsert_window: int  # keyed upserts: batches per median of the per-batch cost
    upsert_spark_batches: int  # keyed upserts into Delta through Spark: batches of the feed
    overhead_batches: int
    history_at: tuple[int, ...]
    history_batches: int
    iceberg_history: int  # eosink-iceberg's history is real commits: this many at most
    static_sizes: tuple[int, ...]
    static_merge_sizes: tuple[int, ...]
    static_append_rows: int
    static_repeats: int
    dynamic_rows: int
    dynamic_parts: int
    recovery_cycles: int
    recovery_files: int
    recovery_rows: int
    recovery_together: bool  # restart all sinks' queries in one process (smoke: saves a JVM)
    reference_batches: int  # beside the reference engines' sinks: tiny micro-batches a path


SIZES = {
    "full": Size(
        batches=5,
        rows=2_000_000,
        repeat=3,
        warm=True,
        pg_batches=4,
        pg_rows=1_000_000,
        yt_batches=4,
        yt_rows=100_000,
        s3_rows=500_000,
        upsert_batches=240,
        upsert_rows=2_000,
        upsert_window=10,
        upsert_spark_batches=60,
        overhead_batches=50,
        history_at=(10, 1_000, 10_000, 100_000),
        history_batches=20,
        iceberg_history=10_000,
        static_sizes=(10_000, 100_000, 1_000_000),
        static_merge_sizes=(10_000, 100_000),
        static_append_rows=10_000,
        static_repeats=5,
        dynamic_rows=500_000,
        dynamic_parts=20,
        recovery_cycles=3,
        recovery_files=20,
        recovery_rows=200_000,
        recovery_together=False,
        reference_batches=100,
    ),
    # Everything runs once, on sizes that only show that it does (no figure means anything):
    # the throughput paths without their warm-up runs, which would double the section.
    "smoke": Size(
        batches=1,
        rows=5_000,
        repeat=1,
        warm=False,
        pg_batches=1,
        pg_rows=5_000,
        yt_batches=1,
        yt_rows=2_000,
        s3_rows=5_000,
        upsert_batches=12,
        upsert_rows=200,
        upsert_window=2,
        upsert_spark_batches=6,
        overhead_batches=5,
        history_at=(10, 100),
        history_batches=3,
        iceberg_history=100,
        static_sizes=(100, 1_000),
        static_merge_sizes=(100,),
        static_append_rows=100,
        static_repeats=1,
        dynamic_rows=400,
        dynamic_parts=2,
        recovery_cycles=1,
        recovery_files=8,
        recovery_rows=5_000,
        recovery_together=True,
        reference_batches=12,
    ),
}

SECTIONS = (
    "throughput",
    "postgres",
    "upsert",
    "s3",
    "overhead",
    "history",
    "yt",
    "recovery",
    "reference",
)


@attrs.define
class Report:
    """What the sections produced, in order, and what an earlier report's kept sections hold."""

    out: str
    kept: Kept | None = None
    #: the section (``SECTIONS``) now running: what ``add`` files its parts under
    running: str = ""
    #: (section, its target)
    targets: list[tuple[str, Target]] = attrs.Factory(list)
    #: (section, title, tables, PNGs)
    sections: list[tuple[str, str, list[Table], list[str]]] = attrs.Factory(list)
    #: (section name, minutes it took, the load while it ran)
    loads: list[tuple[str, float, Load]] = attrs.Factory(list)

    def add(self, title: str, tables: list[Table], pngs: list[str], targets: list[Target]) -> None:
        self.sections.append((self.running, title, tables, pngs))
        self.add_targets(targets)
        for t in tables:
            print("\n" + t.markdown(), flush=True)

    def add_targets(self, targets: list[Target]) -> None:
        self.targets += [(self.running, t) for t in targets]

    def ran(self) -> set[str]:
        return {name for name, *_ in self.sections}

    def markdown(self, header: list[str], size: str) -> str:
        lines = [f"# eosink benchmark report ({size})", "", *header, ""]
        lines += [
            "Rule: every path is warmed once in the same session before it is measured; where "
            "a path runs several times the best and the median are both shown. A smoke report "
            "only shows that every benchmark runs: its figures mean nothing.",
            "",
        ]
        if self.loads:
            lines.append(self.load_table().markdown())
        rows = []
        measured = {t.what for _, t in self.targets}  # a target measured again replaces its row
        for name in SECTIONS:
            if name in self.ran():
                rows += [t.row() for section, t in self.targets if section == name]
            elif self.kept is not None:
                rows += [r for r in self.kept.targets.get(name, []) if r[1] not in measured]
        if rows:
            lines.append(
                Table(
                    "Targets", ("section", "what", "target", "measured", "status"), tuple(rows)
                ).markdown()
            )
        parts = []  # (title, Markdown): this run's and the kept ones, in the order of numbers
        for section, title, tables, pngs in self.sections:
            text = [f"## {title}", "", *(t.markdown() for t in tables)]
            text += [f"![{title}]({png})\n" for png in pngs]
            parts.append((title, "\n".join(text)))
        if self.kept is not None:
            for name, kept_parts in self.kept.blocks.items():
                parts += kept_parts if name not in self.ran() else []
        lines += [text for _, text in sorted(parts, key=lambda part: kept.order(part[0]))]
        return "\n".join(lines)

    def kept_loads(self) -> tuple[tuple[str, ...], ...]:
        """The load rows of the sections kept from an earlier report, in section order."""
        if self.kept is None:
            return ()
        rows = (self.kept.load_row(name) for name in SECTIONS if name not in self.ran())
        return tuple(row for row in rows if row is not None)

    def load_table(self) -> Table:
        total = sum(minutes for _, minutes, _ in self.loads)
        kept = (
            " this run; the sections marked with another run's date are that run's"
            if (self.kept_loads())
            else " in all"
        )
        return Table(
            f"Sections: wall time and the machine's load ({total:.1f} min{kept})",
            (
                "section",
                "minutes",
                "load average, 1 min: start / peak / end",
                "other programs' runnable threads: mean / peak",
                "flag",
            ),
            tuple((name, f"{minutes:.1f}", *load.cells()) for name, minutes, load in self.loads)
            + self.kept_loads(),
            (
                "Sampled every 5 s. The report's own processes (Spark's JVM and Python workers, "
                "the emulator, PostgreSQL, the recovery queries) count in the load average but "
                "not among the other programs: a flagged section with no other programs running "
                "was loaded by the report itself, and its ratios stand; with other programs "
                "running, its absolute figures are pessimistic.",
            ),
        )


def add_to_last_section(report: Report, table: Table, targets: list[Target]) -> None:
    """One more table (and its targets) in the section just added (a sink measured by its own
    benchmark, beside the section's common table)."""
    report.sections[-1][2].append(table)
    report.add_targets(targets)


def section_throughput(
    report: Report, size: Size, work: str, cores: int, progress: Progress
) -> None:
    from eosink.testing.spark import local_spark

    import eosink
    from eosink.registry import installed_sinks

    conf = {
        "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
        "spark.ui.showConsoleProgress": "false",
    }
    spark = local_spark(cores=cores, **conf)
    if installed_sinks():
        eosink.register_data_sources(spark)
    try:
        variants = throughput.run(
            spark, work, size.batches, size.rows, size.repeat, size.warm, progress
        )
        into_yt = yt.throughput(
            spark, work, size.yt_batches, size.yt_rows, size.repeat, size.warm, progress
        )
    finally:
        spark.stop()
    total = size.batches * size.rows
    rates = [
        (v.title, {n: total / t.best for n, t in v.results.items() if t.ran}) for v in variants
    ]
    png = plots.throughput(rates, os.path.join(report.out, "throughput.png"), throughput.SPARK)
    report.add(
        "1. Throughput",
        throughput.tables(variants, size.batches, size.rows, size.repeat, size.warm),
        [png],
        throughput.targets(variants),
    )
    report.add(
        "1c. Throughput into YT",
        [yt.throughput_table(into_yt, size.yt_batches, size.yt_rows, size.repeat)],
        [],
        [],
    )


def section_postgres(report: Report, size: Size, work: str, cores: int, progress: Progress) -> None:
    """eosink-postgres beside Spark's JDBC writer and a bare COPY loop: a table of its own (its
    anchors are not section 1's)."""
    tables, targets = postgres.throughput(
        os.path.join(work, "postgres"),
        size.pg_batches,
        size.pg_rows,
        size.repeat,
        size.warm,
        cores,
        progress,
    )
    report.add("1b. Throughput into PostgreSQL", tables, [], targets)


def section_s3(report: Report, size: Size, work: str, cores: int, progress: Progress) -> None:
    """Section 1's stream on the loopback S3 server: Spark's sink on s3a://, eosink-files and
    eosink-delta (a process of its own: S3A's jars on its JVM's classpath)."""
    tables, targets = s3.run(
        work, size.batches, size.s3_rows, size.repeat, size.warm, cores, progress
    )
    report.add("1e. Throughput on S3", tables, [], targets)


def section_upsert(report: Report, size: Size, work: str, cores: int, progress: Progress) -> None:
    """Keyed upserts, every sink beside its anchor, driver-side (no Spark)."""
    tables, targets = upsert.run(
        work, size.upsert_batches, size.upsert_rows, size.upsert_window, progress
    )
    report.add("1d. Keyed upserts", tables, [], targets)
    add_to_last_section(
        report,
        *upsert.spark_delta(
            work, size.upsert_spark_batches, size.upsert_rows, size.upsert_window, progress
        ),
    )


def section_overhead(report: Report, size: Size, work: str, cores: int, progress: Progress) -> None:
    results = overhead.run(work, size.overhead_batches, progress)
    results.append(postgres.overhead(work, size.overhead_batches, progress))
    png = plots.overhead(
        [(r.sink, r.median, r.p95) for r in results],
        os.path.join(report.out, "overhead.png"),
        overhead.LIMIT_MS,
    )
    report.add(
        "2. Exactly-once overhead per batch",
        [overhead.table(results, size.overhead_batches)],
        [png],
        overhead.targets(results),
    )
    add_to_last_section(report, *iceberg.overhead(work, size.overhead_batches, progress))


def section_history(report: Report, size: Size, work: str, cores: int, progress: Progress) -> None:
    results = history.run(work, list(size.history_at), size.history_batches, progress)
    png = plots.curves(
        history.curves(results),
        os.path.join(report.out, "history.png"),
        "batch (history length)",
        "median ms per batch",
        "Driver cost per batch (is_committed + init + commit) as the history grows",
    )
    report.add(
        "3. Cost as the history grows",
        [history.table(results, size.history_batches)],
        [png],
        history.targets(results),
    )
    add_to_last_section(report, *iceberg.history(work, size.iceberg_history, progress))
    postgres_history(report, size, progress)


def postgres_history(report: Report, size: Size, progress: Progress) -> None:
    """eosink-postgres's per-batch cost at the same history lengths (synthesized proofs)."""
    tables, targets = postgres.history(list(size.history_at), size.history_batches, progress)
    report.add("3b. Cost as the history grows: eosink-postgres", tables, [], targets)


def section_yt(report: Report, size: Size, work: str, cores: int, progress: Progress) -> None:
    static = yt.run_static(
        list(size.static_sizes),
        list(size.static_merge_sizes),
        size.static_append_rows,
        2,
        size.static_repeats,
        progress,
    )
    dynamic = yt.run_dynamic(size.dynamic_rows, size.dynamic_parts, size.repeat, progress)
    lines = {
        yt.KINDS[kind]: [(r["size"], yt.statistics.median(r[kind])) for r in static if r[kind]]
        for kind in yt.KINDS
    }
    png = plots.curves(
        lines,
        os.path.join(report.out, "yt_static.png"),
        "table rows",
        "commit ms (median)",
        f"yt-static: commit of a {size.static_append_rows:,}-row append vs table size (emulator)",
    )
    report.add(
        "4. YT sinks: cost as the table grows, and next to a bare loop",
        [
            yt.static_table(static, size.static_append_rows, size.static_repeats),
            yt.dynamic_table(dynamic, size.dynamic_rows, size.dynamic_parts, size.repeat),
        ],
        [png],
        yt.static_targets(static),
    )


def section_recovery(report: Report, size: Size, work: str, cores: int, progress: Progress) -> None:
    results = recovery.run(
        work,
        size.recovery_cycles,
        size.recovery_files,
        size.recovery_rows,
        size.recovery_together,
        progress,
    )
    png = plots.bars(
        {r.sink: r.from_process.best for r in results},
        os.path.join(report.out, "recovery.png"),
        "seconds from the restarted process' start to its first committed batch (best)",
        "Recovery after SIGKILL",
    )
    report.add(
        "5. Recovery after SIGKILL",
        [recovery.table(results, size.recovery_cycles, size.recovery_rows, size.recovery_together)],
        [png],
        [],
    )


def section_reference(
    report: Report, size: Size, work: str, cores: int, progress: Progress
) -> None:
    """eosink-delta beside Delta's own streaming sink (Spark 4.2, Delta 4.4) and eosink-iceberg
    beside Iceberg's (Spark 4.1, Iceberg 1.12), each in a Spark process of its own."""
    args = (size.batches, size.rows, size.repeat, size.warm, size.reference_batches, progress)
    delta_tables, delta_targets = delta_reference.run(os.path.join(work, "delta"), *args)
    iceberg_tables, iceberg_targets = iceberg_reference.measure(
        os.path.join(work, "iceberg"), *args
    )
    report.add(
        "6. Beside the reference engines' streaming sinks",
        delta_tables + iceberg_tables,
        [],
        delta_targets + iceberg_targets,
    )


RUNS: dict[str, Callable[[Report, Size, str, int, Progress], None]] = {
    "throughput": section_throughput,
    "postgres": section_postgres,
    "s3": section_s3,
    "upsert": section_upsert,
    "overhead": section_overhead,
    "history": section_history,
    "yt": section_yt,
    "recovery": section_recovery,
    "reference": section_reference,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="report", description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="smoke")
    parser.add_argument("--out", required=True, help="folder for report.md and the plots")
    parser.add_argument("--cores", type=int, default=2, help="Spark's local[N]")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"a subset of {','.join(SECTIONS)}"
    )
    parser.add_argument("--work", default=None, help="scratch folder (default: a temp folder)")
    parser.add_argument(
        "--keep",
        default=None,
        help="an earlier report.md whose sections not in --sections are carried over as they "
        "stand (eosink_benchmarks.kept); its plots must be copied to --out by hand",
    )
    args = parser.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    os.makedirs(args.out, exist_ok=True)
    size = SIZES[args.size]
    header = machine.describe(args.cores)
    print("\n".join(header), flush=True)
    report = Report(args.out, kept.read(args.keep) if args.keep else None)
    progress = Progress(len(sections))
    work = tempfile.mkdtemp(prefix="eosink-report-", dir=args.work)
    path = os.path.join(args.out, "report.md")
    try:
        for name in sections:
            progress.start(name)
            report.running = name
            folder = os.path.join(work, name)
            os.makedirs(folder)
            watch, began = LoadWatch().start(), time.monotonic()
            RUNS[name](report, size, folder, args.cores, progress)
            report.loads.append((name, (time.monotonic() - began) / 60, watch.stop()))
            print("\n" + report.load_table().markdown(), flush=True)
            shutil.rmtree(folder, ignore_errors=True)
            # written after every section: a later one that fails leaves what was measured
            with open(path, "w") as f:
                f.write(report.markdown(header, args.size))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    missed = [t for _, t in report.targets if t.ok is False]
    print(f"\n{len(report.targets)} targets, {len(missed)} missed; report: {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
