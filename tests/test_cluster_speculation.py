"""Spark's file writer under speculation, on the standalone cluster: the files sink's
``engine="spark"`` and the delta sink's ``file_writer="spark"`` each publish exactly the rows
of the task attempts Spark committed, never the part files of an attempt that lost.

With ``spark.speculation=true`` a slow task gets a second attempt on another host; the first
one to finish is committed, and the other, killed, may go on writing its part file under the
staging folder's ``_temporary/`` after the job's commit removed it (a Python worker gets
``spark.python.task.killTimeout`` to stop). A sink that took every part file it found in the
staging folder would publish that attempt's rows twice, under a proof that counts them once.

Here the first attempt of partition 0 of every staging write waits until its speculative copy
has written everything and the job's commit has removed ``_temporary/``, then hands its rows to
Spark's writer (the kill timeout is long, so its Python worker is not stopped first).
Speculation only runs a copy on a host other than the original's, so a worker on 127.0.0.2
joins the shared cluster for this test. The proof's row count must equal what independent
readers see (Spark's reader for the files sink, delta-rs for delta), every row exactly once;
marker files written by the attempts show that a speculative copy ran to its end in every
staging write while the original held its rows back, so the test cannot pass without
speculation.

On the staging code before ``committed_part_files`` (which walked ``_temporary/`` too) this
test passes as well: Spark's job commit removes ``_temporary/`` before the driver lists the
folder, and the losing attempt here hands on its rows only after that, so a file the walk would
have taken never coincides with the listing here. The unit tests with a planted leftover
(sink-files, sink-delta) are the ones that fail on that code; this one guards the real
speculation path, end to end.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter

import pytest

import eosink
from eosink.testing.cluster import WORKER_CLASS, Worker, spark_home

ROWS = 100  # per batch, in two partitions
SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.quantile": "0.5",
    "spark.speculation.minTaskRuntime": "500ms",
    # the losing attempt's Python worker is not killed while it still writes
    "spark.python.task.killTimeout": "120s",
}


@pytest.fixture
def worker_on_another_host(spark_cluster):
    """A third worker on 127.0.0.2: Spark never runs a task's speculative copy on a host that
    runs an attempt of it, and the fixture's workers all share 127.0.0.1."""
    cluster = spark_cluster
    work_dir = cluster.root / "work" / "other-host"
    work_dir.mkdir(parents=True)
    log = cluster.root / "logs" / "other-host.log"
    with open(log, "ab") as out:
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), WORKER_CLASS, cluster.master_url]
            + ["--host", "127.0.0.2", "--cores", "2", "--memory", cluster.worker_memory]
            + ["--webui-port", "0", "--work-dir", str(work_dir)],
            env={**cluster.env(), "SPARK_LOCAL_IP": "127.0.0.2"},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cluster.root,
            start_new_session=True,
        )
    worker = Worker(len(cluster.running), process, log, work_dir)
    try:
        cluster._wait_for(log, "Successfully registered with master", process, 120)
        yield worker
    finally:
        cluster.kill_worker(worker)


def slow_first_attempt(marks: str, target_root: str):
    """mapInArrow: every attempt marks its start and end (``s<stage>-p<partition>-a<attempt>``);
    the first attempt of partition 0 waits (up to a minute) for its speculative copy to end,
    then (up to a few seconds) for the job's commit to remove ``_temporary/`` under
    ``target_root``, and only then hands its rows to Spark's writer."""

    def mark(name: str) -> None:
        with open(os.path.join(marks, name), "w"):
            pass

    def wait(done, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not done():
            time.sleep(0.002)

    def committed() -> bool:
        return not any("_temporary" in dirs for _, dirs, _ in os.walk(target_root))

    def apply(batches):
        from pyspark import TaskContext

        task = TaskContext.get()
        name = f"s{task.stageId()}-p{task.partitionId()}-a{task.attemptNumber()}"
        mark(f"{name}-start")
        if task.partitionId() == 0 and task.attemptNumber() == 0:
            copy_end = os.path.join(marks, f"s{task.stageId()}-p0-a1-end")
            wait(lambda: os.path.exists(copy_end), 60)
            wait(committed, 5)
        yield from batches
        mark(f"{name}-end")

    return apply


def read_delta(path: str) -> list[int]:
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table().column("id").to_pylist()


def test_a_speculative_copy_wins_and_only_its_rows_are_published(
    spark_cluster, worker_on_another_host, tmp_path
):
    marks, targets = tmp_path / "marks", tmp_path / "targets"
    marks.mkdir()
    files_path, delta_path = str(targets / "files"), str(targets / "delta")
    sinks = [
        eosink.sink("files", path=files_path, engine="spark"),
        eosink.sink("delta", path=delta_path, file_writer="spark"),
    ]
    spark = spark_cluster.session(**SPECULATION)
    try:
        proofs = Counter()
        expected = []
        for version in (1, 2):
            first = (version - 1) * ROWS
            df = spark.range(first, first + ROWS, 1, 2).mapInArrow(
                slow_first_attempt(str(marks), str(targets)), "id long"
            )
            for outcome in eosink.write_batch(df, *sinks, writer_id="job", version=version):
                assert outcome.status == "committed", outcome
                proofs[outcome.ctx.sink] += outcome.rows
            expected += range(first, first + ROWS)
        held = {
            "files": Counter(r.id for r in spark.read.parquet(files_path).collect()),
            "delta": Counter(read_delta(delta_path)),
        }
    finally:
        spark.stop()  # the application holds every core of the cluster: free them

    names = sorted(p.name for p in marks.iterdir())
    stages = {n.split("-")[0] for n in names if n.endswith("-p0-a0-start")}
    copied = {s for s in stages if f"{s}-p0-a1-end" in names}
    # a staging write per sink and batch, each with a speculative copy of partition 0 that
    # wrote all its rows while the original held them back
    assert len(copied) >= 4, " ".join(names)
    for sink, rows in held.items():
        assert proofs[sink] == sum(rows.values()) == len(expected), (sink, proofs, rows.total())
        assert rows == Counter(expected), (
            f"{sink}: duplicates: {sum(n - 1 for n in rows.values() if n > 1)}, "
            f"lost: {len(set(expected) - set(rows))}"
        )
