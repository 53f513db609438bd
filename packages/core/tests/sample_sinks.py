"""A minimal in-memory sink for the core's own tests (a store that lives in this process)."""

from __future__ import annotations

import threading
from collections import defaultdict

import attrs

from eosink.plugin import AlreadyCommitted, Proof, Sink, Staged, hookimpl
from eosink.staging import record_rows

STORES: dict[str, dict] = defaultdict(lambda: {"rows": [], "proofs": {}, "staged": {}})
LOCK = threading.Lock()


@attrs.frozen
class MemoryOptions:
    name: str
    fail_commit: bool = False


class MemorySink(Sink):
    """Rows and proofs in a dict; commit publishes both under one lock."""

    name = "memory"
    Options = MemoryOptions

    @property
    def store(self) -> dict:
        return STORES[self.options.name]

    @hookimpl
    def is_committed(self, ctx):
        proofs = [p for (w, b), p in self.store["proofs"].items() if w == ctx.writer_id]
        covering = [p for p in proofs if p.batch_id >= ctx.batch_id]
        return max(covering, key=lambda p: (p.batch_id == ctx.batch_id, p.batch_id), default=None)

    @hookimpl
    def init(self, ctx):
        return f"{ctx.writer_id}-{ctx.batch_id}"

    @hookimpl
    def write(self, state, partition_id, attempt, batches):
        key = (state, partition_id, attempt)
        rows = [row for batch in batches for row in batch.to_pylist()]
        with LOCK:
            self.store["staged"][key] = rows
        return key

    @hookimpl
    def commit(self, ctx, messages, proof: Proof):
        with LOCK:
            if any(w == ctx.writer_id and b >= ctx.batch_id for w, b in self.store["proofs"]):
                raise AlreadyCommitted(ctx.label)
            if self.options.fail_commit:
                raise RuntimeError("commit failed")
            for key in messages:
                self.store["rows"].extend(self.store["staged"].pop(key))
            self.store["proofs"][(ctx.writer_id, ctx.batch_id)] = proof

    @hookimpl
    def abort(self, messages):
        with LOCK:
            for key in messages or ():
                self.store["staged"].pop(key, None)


@attrs.frozen
class StagingOptions:
    name: str
    fail_commit: bool = False
    offer: bool = True
    fail_staging: bool = False


class DataFrameStagingSink(MemorySink):
    """A MemorySink that stages a whole "DataFrame" (here: a list of rows) on the driver."""

    name = "memory"
    Options = StagingOptions

    @hookimpl
    def write_dataframe(self, state, df):
        if not self.options.offer:
            return None
        key = (state, "dataframe", 0)
        with LOCK:
            self.store["staged"][key] = list(df)
        if self.options.fail_staging:
            raise RuntimeError("staging failed")
        record_rows(len(df))  # what eosink.spark.stage_dataframe does with Spark's count
        return Staged(message=key)
