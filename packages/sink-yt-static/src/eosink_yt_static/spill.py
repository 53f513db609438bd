"""What a retried PartTx needs: the partition's rows again, from its start.

A PartTx is retried as a unit (a new PartTx writes the partition again) when it failed in a way
the client cannot retry request by request. Spark's rows stream by once, so the retry reads the
requests already sent back from local disk, and the rest from the source. Only that is kept:
nothing while the partition fits one request (the usual case), and the requests before the
last one otherwise, each in its own Arrow IPC file in one of Spark's local dirs
(``SPARK_LOCAL_DIRS``, which Spark sets for its Python workers; the system's temporary folder
outside Spark), removed when the task ends.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Iterator

import pyarrow as pa


def local_dir() -> str:
    """One of Spark's local dirs (they are spread over the executor's disks)."""
    dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if os.path.isdir(d)]
    return random.choice(dirs) if dirs else tempfile.gettempdir()


class PartFeed:
    """The rows of one partition, cut into requests, readable again by a retry."""

    def __init__(self, source: Iterator[pa.RecordBatch]) -> None:
        self.source = (b for b in source if b.num_rows)
        self.held: list[pa.RecordBatch] = []  # taken from the source, not spilled
        self.files: list[str] = []
        self.folder: str | None = None
        self.spilled_bytes = 0

    def requests(self, rows_per_request: int) -> Iterator[list[pa.RecordBatch]]:
        """The partition from its start as requests of about ``rows_per_request`` rows.

        Each request is sent before the next one is asked for; the batches of sent requests
        are spilled only once more rows follow them (a retry needs them then)."""
        spilled = self._replay()
        index = 0  # next batch of self.held
        sent_held = 0  # leading batches of self.held that were in sent requests
        request: list[pa.RecordBatch] = []
        rows = held_in_request = 0
        while True:
            batch = next(spilled, None)
            if batch is None:
                if index == len(self.held):
                    taken = next(self.source, None)
                    if taken is None:
                        break
                    self.held.append(taken)
                batch = self.held[index]
                index += 1
                held_in_request += 1
                if sent_held:
                    self._spill(self.held[:sent_held])
                    del self.held[:sent_held]
                    index -= sent_held
                    sent_held = 0
            request.append(batch)
            rows += batch.num_rows
            if rows >= rows_per_request:
                yield request
                sent_held += held_in_request
                request, rows, held_in_request = [], 0, 0
        if request:
            yield request

    def _replay(self) -> Iterator[pa.RecordBatch]:
        for path in list(self.files):
            with pa.ipc.open_stream(path) as reader:
                yield from reader

    def _spill(self, batches: list[pa.RecordBatch]) -> None:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="eosink-yt-part-", dir=local_dir())
        path = os.path.join(self.folder, f"{len(self.files)}.arrow")
        with pa.ipc.new_stream(path, batches[0].schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        self.files.append(path)
        self.spilled_bytes += os.path.getsize(path)

    def close(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
