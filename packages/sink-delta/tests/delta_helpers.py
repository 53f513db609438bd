"""Driving the delta sink without Spark, and reading what the Delta log holds."""

from __future__ import annotations

import glob
import json
import os
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake
from deltalake.transaction import CommitProperties, Transaction
from eosink_delta.sink import DeltaSink
from eosink_delta.proof import PROOF_KEY

from eosink import BatchOutcome
from eosink.plugin import BatchContext, Proof
from eosink.testing import run_batch
from eosink.testing.local import LocalRunner

QUERY = "00000000-0000-4000-8000-00000000000a"


def rows(batch_id: int, n: int = 5, **extra: Any) -> pa.RecordBatch:
    ids = [batch_id * 1000 + i for i in range(n)]
    columns = {"id": pa.array(ids, pa.int64()), "name": pa.array([f"r{i}" for i in ids])}
    columns.update(extra)
    return pa.record_batch(columns)


def run(
    sink: DeltaSink,
    batch_id: int,
    parts: list[pa.RecordBatch] | None = None,
    *,
    writer_id: str = "w",
    kind: str = "stream",
    mode: str = "append",
    query_id: str | None = QUERY,
    plugins: tuple = (),
) -> BatchOutcome:
    parts = [rows(batch_id)] if parts is None else parts
    ctx = BatchContext(
        sink="delta",
        writer_id=writer_id,
        batch_id=batch_id,
        kind=kind,  # type: ignore[arg-type]
        mode=mode,  # type: ignore[arg-type]
        query_id=query_id if kind == "stream" else None,
        checkpoint=f"/ckpt/{query_id}" if kind == "stream" else None,
    )
    schema = parts[0].schema
    return run_batch(sink, ctx, schema, LocalRunner([[p] for p in parts]), plugins=plugins)


def log_actions(table: str) -> list[tuple[int, dict[str, Any]]]:
    """Every action of every commit JSON in the log, with its table version."""
    out = []
    for name in sorted(glob.glob(os.path.join(table, "_delta_log", "*.json"))):
        version = int(os.path.basename(name).split(".")[0])
        with open(name) as f:
            out.extend((version, json.loads(line)) for line in f if line.strip())
    return out


def txns(table: str) -> list[tuple[str, int]]:
    return [(a["txn"]["appId"], a["txn"]["version"]) for _, a in log_actions(table) if "txn" in a]


def log_version(table: str) -> int:
    return len(glob.glob(os.path.join(table, "_delta_log", "*.json"))) - 1


def commit_elsewhere(path: str, batch_id: int, writer_id: str = "w") -> None:
    """Another process's attempt of a batch (its rows, txn and proof), committed by delta-rs."""
    proof = Proof(writer_id=writer_id, batch_id=batch_id, query_id=QUERY, rows=5)
    write_deltalake(
        path,
        pa.Table.from_batches([rows(batch_id)]),
        mode="append",
        commit_properties=CommitProperties(
            app_transactions=[Transaction(writer_id, batch_id)],
            custom_metadata={PROOF_KEY: proof.to_json()},
        ),
    )
