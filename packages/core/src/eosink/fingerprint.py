"""An order-independent fingerprint of Arrow record batches.

Each row hashes to 64 bits (pandas' stable, keyed per-row hash of the values in column
order); the fingerprint is the row count and the sum of row hashes modulo 2**64. A sum does
not depend on row order or partitioning, so a faithful replay yields the same fingerprint
however Spark split it, while a replay with other rows almost surely does not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from eosink.model import Fingerprint


def fingerprint_batch(batch: pa.RecordBatch) -> Fingerprint:
    """Fingerprint one record batch (pandas' stable per-row hash, summed with wrap-around)."""
    if batch.num_rows == 0:
        return Fingerprint()
    from pandas.util import hash_pandas_object

    hashes = hash_pandas_object(batch.to_pandas(), index=False).to_numpy(np.uint64)
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
