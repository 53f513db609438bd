"""An order-independent fingerprint of Arrow record batches.

Each row hashes to 64 bits (pandas' stable, keyed per-row hash of the values in column
order); the fingerprint is the row count and the sum of row hashes modulo 2**64. A sum does
not depend on row order or partitioning, so a faithful replay yields the same fingerprint
however Spark split it, while a replay with other rows almost surely does not.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from eosink.model import Fingerprint


def _canonical_text(value: Any) -> str:
    """A nested value (list, struct, map) as text that is equal exactly when the value is."""
    return json.dumps(value, default=repr, separators=(",", ":"), ensure_ascii=False)


def _hashable(batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch with its nested columns as canonical text: pandas hashes lists and dicts as
    unhashable objects and fails. Other columns are left as they are, so their fingerprints
    (stored in proofs) stay the same."""
    nested = [i for i, f in enumerate(batch.schema) if pa.types.is_nested(f.type)]
    if not nested:
        return batch
    columns = list(batch.columns)
    for i in nested:
        values = columns[i].to_pylist()
        columns[i] = pa.array([None if v is None else _canonical_text(v) for v in values])
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def fingerprint_batch(batch: pa.RecordBatch) -> Fingerprint:
    """Fingerprint one record batch (pandas' stable per-row hash, summed with wrap-around)."""
    if batch.num_rows == 0:
        return Fingerprint()
    from pandas.util import hash_pandas_object

    frame = _hashable(batch).to_pandas()
    hashes = hash_pandas_object(frame, index=False).to_numpy(np.uint64)
    return Fingerprint(batch.num_rows, int(hashes.sum(dtype=np.uint64)))


def fingerprint_batches(batches: Iterable[pa.RecordBatch]) -> Fingerprint:
    result = Fingerprint()
    for batch in batches:
        result = result.combine(fingerprint_batch(batch))
    return result


def counting(
    batches: Iterator[pa.RecordBatch], with_fingerprint: bool
) -> tuple[Iterator[pa.RecordBatch], list[Fingerprint]]:
    """Pass batches through while counting rows (and fingerprinting, if asked).

    Returns the pass-through iterator and a one-element list that holds the running result, so
    the caller can read it after the sink consumed the iterator.
    """
    box = [Fingerprint()]

    def passthrough() -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if with_fingerprint:
                box[0] = box[0].combine(fingerprint_batch(batch))
            else:
                box[0] = Fingerprint(box[0].rows + batch.num_rows, 0)
            yield batch

    return passthrough(), box
