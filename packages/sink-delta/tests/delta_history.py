"""A Delta table with a long history, synthesized in bulk (tests and the per-batch benchmark).

A stream that ran for months leaves tens of thousands of commits, each adding a few files.
Running that many batches through the sink would take hours, so this writes the commit JSONs
directly: commit ``v`` adds ``files_per_commit`` files (hard links of one real Parquet file,
so readers can read every row) and records ``txn(appId=writer, version=v - 1)`` with an eosink
proof in its ``commitInfo``, as the sink's own commits do. delta-rs then writes the checkpoints
it would have written every ``checkpoint_every`` commits (only the last ones: older ones are
never read). The result is a table delta-rs, and the sink, see as one with that history.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import time

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from eosink.plugin import Proof

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
QUERY = "00000000-0000-4000-8000-00000000000a"
LINKS_PER_SEED = 50_000


def commit_file(path: str, version: int) -> str:
    return os.path.join(path, "_delta_log", f"{version:020d}.json")


def copy_table(source: str, target: str) -> None:
    """A copy to commit into: data files hard-linked (never rewritten), the log copied."""
    os.makedirs(os.path.join(target, "_delta_log"))
    for name in os.listdir(source):
        if name != "_delta_log":
            try:
                os.link(os.path.join(source, name), os.path.join(target, name))
            except OSError as exc:  # the file has as many links as the file system allows
                if exc.errno != errno.EMLINK:
                    raise
                shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
    for name in os.listdir(os.path.join(source, "_delta_log")):
        shutil.copy2(os.path.join(source, "_delta_log", name), os.path.join(target, "_delta_log"))


def age_log(path: str, days: float) -> None:
    """Makes every log file look ``days`` old: log cleanup judges by modification time."""
    then = time.time() - days * 86400
    for name in glob.glob(os.path.join(path, "_delta_log", "0*")):
        os.utime(name, (then, then))


def synthesize(
    path: str,
    *,
    commits: int,
    files_per_commit: int = 1,
    writer_id: str = "w",
    checkpoint_every: int = 100,
    checkpoints: int = 1,
    query_id: str = QUERY,
) -> None:
    """A table at version ``commits`` whose writer ``writer_id`` is at batch ``commits - 1``.

    Version 0 creates the table; version ``v >= 1`` holds batch ``v - 1`` of the writer with
    ``files_per_commit`` one-row files. The last ``checkpoints`` versions due for a checkpoint every
    ``checkpoint_every`` commits get one, as delta-rs' post-commit hook writes them.
    """
    DeltaTable.create(path, SCHEMA)
    seed = os.path.join(path, "_seed.parquet")
    pq.write_table(pa.table({"id": [0], "name": ["seed"]}, schema=SCHEMA), seed)
    size = os.path.getsize(seed)
    now = int(time.time() * 1000)
    links = 0
    for version in range(1, commits + 1):
        batch = version - 1
        lines = []
        for n in range(files_per_commit):
            name = f"part-{n:05d}-history-{version}.snappy.parquet"
            if links and links % LINKS_PER_SEED == 0:  # file systems cap one file's links
                copy = f"{seed}.{links}"
                shutil.copyfile(seed, copy)
                os.replace(copy, seed)
            os.link(seed, os.path.join(path, name))
            links += 1
            stats = {"numRecords": 1, "nullCount": {"id": 0, "name": 0}}
            add = {
                "path": name,
                "partitionValues": {},
                "size": size,
                "modificationTime": now,
                "dataChange": True,
                "stats": json.dumps(stats),
            }
            lines.append({"add": add})
        lines.append({"txn": {"appId": writer_id, "version": batch}})
        proof = Proof(writer_id=writer_id, batch_id=batch, query_id=query_id, rows=files_per_commit)
        info = {
            "timestamp": now,
            "operation": "WRITE",
            "operationParameters": {"mode": "Append"},
            "readVersion": version - 1,
            "eosink.proof": proof.to_json(),
            "eosink.attempt": f"history-{version}",
        }
        lines.insert(0, {"commitInfo": info})
        with open(commit_file(path, version), "x") as f:
            f.write("\n".join(json.dumps(line) for line in lines) + "\n")
    os.unlink(seed)
    # delta-rs checkpoints the commit whose version + 1 is a multiple of the interval.
    due = [v for v in range(1, commits + 1) if (v + 1) % checkpoint_every == 0]
    for version in due[-checkpoints:] if checkpoints else ():
        DeltaTable(path, version=version).create_checkpoint()
