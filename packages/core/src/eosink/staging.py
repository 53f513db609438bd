"""What the core observes while a sink's ``write_dataframe`` stages a batch.

The proof records the batch's row count. On the ``write`` path the core counts the rows it
hands to every task; on the ``write_dataframe`` path the rows never pass through the core, so
the core counts them where Spark writes them: :func:`eosink.spark.stage_dataframe` observes
the write and records the count here, and ``run_batch`` takes the proof's row count from this
record, not from what the sink reports. A ``Staged`` without a recorded count is an error.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from eosink.errors import SinkError
from eosink.model import BatchContext, Staged

_local = threading.local()


@attrs.define
class Observed:
    """The running ``write_dataframe`` call: what it is for, and the rows the core counted."""

    ctx: BatchContext
    state: Any
    #: executor plugins of the run: the staging write runs them around every task
    plugins: tuple[Any, ...] = ()
    rows: int | None = None

    def rows_of(self, staged: Staged) -> int:
        """The proof's row count: the core's, checked against the sink's own if it gave one."""
        if self.rows is None:
            raise SinkError(
                f"{self.ctx.label}: write_dataframe returned a Staged but staged nothing through "
                "eosink.spark.stage_dataframe, so the core has no row count for the proof; "
                "stage the DataFrame with that helper"
            )
        if staged.rows is not None and staged.rows != self.rows:
            raise SinkError(
                f"{self.ctx.label}: write_dataframe reports {staged.rows} rows but Spark wrote "
                f"{self.rows}; nothing was committed"
            )
        return self.rows


@contextmanager
def observing(ctx: BatchContext, state: Any, plugins: tuple[Any, ...] = ()) -> Iterator[Observed]:
    """Open the record of a ``write_dataframe`` call (by ``run_batch``, in the driver thread)."""
    observed = Observed(ctx, state, plugins)
    _local.observed = observed
    try:
        yield observed
    finally:
        _local.observed = None


def current() -> Observed | None:
    """The record of the ``write_dataframe`` call running in this thread, if any."""
    return getattr(_local, "observed", None)


def record_rows(rows: int) -> None:
    """Add rows the core saw being staged to the running call's record."""
    observed = current()
    if observed is not None:
        observed.rows = (observed.rows or 0) + rows
