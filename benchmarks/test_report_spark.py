"""The report at its smoke size: every section runs and the report and its plots are written.

Timings at this size mean nothing and are not checked.
"""

import os

from eosink_benchmarks import report


def test_smoke_report_is_written(tmp_path, capsys):
    out = tmp_path / "report"
    assert report.main(["--size", "smoke", "--out", str(out), "--work", str(tmp_path)]) == 0
    text = (out / "report.md").read_text()
    for heading in (
        "## 1. Throughput",
        "## 1d. Keyed upserts",
        "## 1e. Throughput on S3",
        "## 6. Beside the reference engines' streaming sinks",
        "### Keyed upserts into Delta through Spark",
        "## 2. Exactly-once overhead per batch",
        "## 3. Cost as the history grows",
        "## 4. YT sinks",
        "## 5. Recovery after SIGKILL",
        "### Targets",
    ):
        assert heading in text, heading
    # every path of the throughput section ran, the data-source doors included
    throughput = text.split("## 1b.")[0]
    for name in (
        "Spark's parquet sink",
        "floor: a Python data source that drains its Arrow batches",
        "floor, batches by rows",
        "eosink-files, data source",
        "eosink-files, data source, batches by rows",
        "eosink-delta, data source",
        "eosink-iceberg, data source",
        "eosink-iceberg, foreachBatch",
    ):
        rows = [line for line in throughput.splitlines() if line.startswith(f"| {name} |")]
        assert len(rows) == 2 and not any("n/a" in row for row in rows), rows
    for name in ("eosink-sqlite (example), data source", "eosink-sqlite (example), foreachBatch"):
        rows = [line for line in throughput.splitlines() if line.startswith(f"| {name} |")]
        assert len(rows) == 2 and "n/a" not in rows[0], rows  # not partitioned: one table
    # both YT sinks through both doors beside their bare client loops
    into_yt = text.split("## 1c.")[1].split("## 1d.")[0]
    rows = [line for line in into_yt.splitlines() if line.startswith("| yt-") or "| bare" in line]
    assert len(rows) == 6 and not any("n/a" in row for row in rows), rows
    # the load of every section, and the recovery of every sink measured there
    assert "### Sections: wall time and the machine's load" in text
    recovery = text.split("## 5.")[1]
    for name in ("eosink-files, foreachBatch", "eosink-delta, foreachBatch", "Spark's parquet"):
        assert f"| {name}" in recovery, name
    # eosink-postgres: both doors and its bare COPY loop ran (the JDBC row needs the driver jar)
    postgres = text.split("## 1b.")[1].split("## 2.")[0]
    for name in ("eosink-postgres (data source)", "eosink-postgres (foreachBatch)", "bare COPY"):
        assert any(line.startswith(f"| {name}") for line in postgres.splitlines()), name
    assert "| eosink-postgres |" in text.split("## 2.")[1].split("## 3.")[0]
    assert "## 3b. Cost as the history grows: eosink-postgres" in text
    # keyed upserts: every sink's upsert beside its anchor, in both tables, and their targets
    upserts = text.split("## 1d.")[1].split("## 2.")[0]
    assert "### Keyed upserts: per-batch cost as the table grows" in upserts
    for sink in ("postgres", "iceberg", "delta"):
        rows = [line for line in upserts.splitlines() if line.startswith(f"| {sink} |")]
        assert len(rows) == 4 and not any("n/a" in row for row in rows), rows
        assert f"| 1d. upsert | eosink-{sink} upsert vs " in text, sink
    # on S3: Spark's sink on s3a:// beside both eosink sinks, both doors
    on_s3 = text.split("## 1e.")[1].split("## 2.")[0]
    for name in (
        "Spark's parquet sink, s3a://",
        "eosink-files, data source",
        "eosink-delta, data source",
    ):
        rows = [line for line in on_s3.splitlines() if line.startswith(f"| {name} |")]
        assert len(rows) == 1 and "n/a" not in rows[0], rows
    # the reference engines' own streaming sinks beside eosink's doors, and their targets
    beside = text.split("## 6.")[1]
    for name in ("Delta's streaming sink", "Iceberg's streaming sink"):
        assert f"| {name} |" in beside, name
    assert "| 6. beside Delta's sink |" in text and "| 6. beside Iceberg's sink |" in text
    pngs = sorted(p for p in os.listdir(out) if p.endswith(".png"))
    assert pngs == [
        "history.png",
        "overhead.png",
        "recovery.png",
        "throughput.png",
        "yt_static.png",
    ]
    for png in pngs:
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({png})" in text
    printed = capsys.readouterr().out
    assert "### Throughput, unpartitioned" in printed and "targets," in printed
