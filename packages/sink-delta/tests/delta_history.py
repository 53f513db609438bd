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

import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from eosink import Proof

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])
QUERY = "00000000-0000-4000-8000-00000000000a"


def commit_file(path: str, version: int) -> str:
    return os.path.join(path, "_delta_log", f"{version:020d}.json")


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
    ``files_per_commit`` one-row files. The last ``checkpoints`` multiples of
    ``checkpoint_every`` get a checkpoint, as delta-rs' post-commit hook writes them.
    """
    DeltaTable.create(path, SCHEMA)
    seed = os.path.join(path, "_seed.parquet")
    pq.write_table(pa.table({"id": [0], "name": ["seed"]}, schema=SCHEMA), seed)
    size = os.path.getsize(seed)
    now = int(time.time() * 1000)
    for version in range(1, commits + 1):
        batch = version - 1
        lines = []
        for n in range(files_per_commit):
            name = f"part-{n:05d}-history-{version}.snappy.parquet"
            os.link(seed, os.path.join(path, name))
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
    last = commits - commits % checkpoint_every
    for version in range(max(last - (checkpoints - 1) * checkpoint_every, 1), last + 1):
        if version % checkpoint_every == 0:
            DeltaTable(path, version=version).create_checkpoint()
