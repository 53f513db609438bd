"""Running batches into the files sink without Spark."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pyarrow as pa
from eosink_files.store import LocalStore

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner


def rows(batch_id: int, partition: int = 0, n: int = 4, **columns) -> pa.RecordBatch:
    ids = [batch_id * 1000 + partition * 100 + i for i in range(n)]
    data = {"id": pa.array(ids, pa.int64()), "name": pa.array([f"r{i}" for i in ids])}
    data.update({k: pa.array(v) for k, v in columns.items()})
    return pa.record_batch(data)


def run(sink, batch_id, partitions=None, *, writer="w", kind="stream", mode="append", query="q1"):
    partitions = [[rows(batch_id, p)] for p in range(2)] if partitions is None else partitions
    schema = partitions[0][0].schema
    ctx = BatchContext(
        "files",
        writer,
        batch_id,
        kind=kind,
        mode=mode,
        query_id=query if kind == "stream" else None,
    )
    return run_batch(sink, ctx, schema, LocalRunner(partitions))


def synthesize_history(
    out: str,
    batches: int,
    *,
    trigger_s: float = 0.1,
    delay_s: float = 600.0,
    interval: int = 10,
    files_per_batch: int = 2,
    writer: str = "w",
    query: str = "q1",
) -> None:
    """The log of one writer after ``batches`` micro-batches (ids 0 .. batches - 1), in bulk.

    The latest compact lists every file of the history and carries the proofs, the deltas
    after it are complete, as the sink writes them. Older log files still inside the cleanup
    delay (``delay_s / trigger_s`` of them, modification times ``trigger_s`` apart) are small
    stand-ins: only listed, aged and deleted, never read. The data files are not created.
    """
    from eosink.model import Proof
    from eosink_files.log import LOG_DIR, FileEntry, log_name, render
    from eosink_files.proof import ProofEntry, closing_line
    from eosink_files.store import open_store

    store = open_store(out)
    log_dir = os.path.join(out, LOG_DIR)
    os.makedirs(log_dir)
    log_uri = store.uri(LOG_DIR)
    now = time.time()

    def mtime(log_id: int) -> float:
        return now - (batches - 1 - log_id) * trigger_s

    def file_lines(log_id: int) -> list[str]:
        return [
            FileEntry(
                store.uri(
                    f"part-{p:05d}-{log_id:032x}-{log_id * files_per_batch + p}-c000.snappy.parquet"
                ),
                40_000_000,
                int(mtime(log_id) * 1000),
            ).to_line()
            for p in range(files_per_batch)
        ]

    def proof_line(log_id: int) -> str:
        proof = Proof(writer, log_id, query, rows=2_000_000, committed_at=mtime(log_id))
        return ProofEntry(proof, f"{log_id:032x}", log_id, "parquet", (), "append").to_line(log_uri)

    compacts = [i for i in range(batches) if (i + 1) % interval == 0]
    latest_compact = compacts[-1] if compacts else -1
    keep_from = compacts[-2] if len(compacts) >= 2 else 0
    oldest = min(max(0, batches - int(delay_s / trigger_s)), keep_from)
    for log_id in range(oldest, batches):
        compact = (log_id + 1) % interval == 0
        if log_id == latest_compact:
            lines = [line for i in range(log_id + 1) for line in file_lines(i)]
            proofs = [proof_line(i) for i in range(max(0, log_id - 9), log_id + 1)]
            data = render(proofs, lines, b"", closing_line(log_id, log_uri))
        elif log_id > latest_compact:
            data = render(
                [proof_line(log_id)], file_lines(log_id), b"", closing_line(log_id, log_uri)
            )
        else:  # a stand-in: never read, only listed, aged and deleted
            data = render([proof_line(log_id)], [], b"", closing_line(log_id, log_uri))
        path = os.path.join(log_dir, log_name(log_id, compact))
        with open(path, "wb") as f:
            f.write(data)
        os.utime(path, (mtime(log_id), mtime(log_id)))


def commit_elsewhere(out: str, writer: str, batch_id: int, storage_options=None) -> str:
    """Commit one batch into ``out`` from another Python process (another driver, a zombie)."""
    sink = f"FilesSink(path={out!r}, storage_options={storage_options or {}!r})"
    return run_elsewhere(
        "import sys; from files_helpers import run; from eosink_files.sink import FilesSink; "
        f"print(run({sink}, {batch_id}, writer={writer!r}).status)"
    )


def run_elsewhere(code: str) -> str:
    """Run Python ``code`` in another process, on this one's import path; the last line it
    printed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def record_listings(monkeypatch) -> list[str]:
    """Through pytest's ``monkeypatch``, every folder a local store lists from now on, in a
    list that grows as the test runs."""
    listdir, listed = LocalStore.listdir, []

    def counted(self, relpath=""):
        listed.append(relpath)
        return listdir(self, relpath)

    monkeypatch.setattr(LocalStore, "listdir", counted)
    return listed
