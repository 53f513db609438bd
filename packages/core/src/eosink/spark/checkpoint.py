"""Reading a streaming query's checkpoint: the batch it runs and the query it belongs to.

Where Spark does not hand these to eosink (the data source's writer; ``foreachBatch`` on Spark
Connect), the checkpoint tells them: the offset log is written before a batch runs, and
``metadata`` holds the query id, which stays the same across restarts of the query.
"""

from __future__ import annotations

import json
import os
import posixpath

from eosink.errors import ConfigurationError


def _read_text(path: str) -> str:
    if "://" in path and not path.startswith("file:"):
        import fsspec  # only for checkpoints outside the local filesystem

        with fsspec.open(path.replace("s3a://", "s3://"), "r") as f:
            return f.read()
    with open(path.removeprefix("file:"), encoding="utf-8") as f:
        return f.read()


def _list_names(path: str) -> list[str]:
    if "://" in path and not path.startswith("file:"):
        import fsspec

        fs, root = fsspec.core.url_to_fs(path.replace("s3a://", "s3://"))
        return [posixpath.basename(p.rstrip("/")) for p in fs.ls(root, detail=False)]
    return os.listdir(path.removeprefix("file:"))


def stream_position(checkpoint: str) -> tuple[int, str | None]:
    """The batch id Spark is running (latest offset log entry) and the query id of a checkpoint."""
    try:
        batches = [
            int(n) for n in _list_names(posixpath.join(checkpoint, "offsets")) if n.isdigit()
        ]
    except FileNotFoundError:
        batches = []
    if not batches:
        raise ConfigurationError(
            f"checkpoint {checkpoint!r} holds no offset log: set checkpointLocation on the query"
        )
    return max(batches), query_id_of(checkpoint)


def query_id_of(checkpoint: str) -> str | None:
    """The id of the query a checkpoint belongs to (Spark writes it to ``metadata`` at start)."""
    try:
        return json.loads(_read_text(posixpath.join(checkpoint, "metadata"))).get("id")
    except (OSError, ValueError):
        return None
