"""Errors that eosink raises. Each message names what went wrong and how to fix it."""

from __future__ import annotations


class EosinkError(Exception):
    """Base class of every error eosink raises on purpose."""


class ConfigurationError(EosinkError, ValueError):
    """The sink or the writer was configured wrongly; nothing was written."""


class UnknownSinkError(ConfigurationError):
    """No installed sink has the requested name."""


class MissingWriterIdError(ConfigurationError):
    """A writer id is required: it is the identity under which progress is recorded."""

    def __init__(self, sink: str) -> None:
        super().__init__(
            f"sink {sink!r}: no writer id given. eosink records which batches are committed per "
            "writer id, so every query (or batch job) must choose a stable one, e.g. "
            "foreach_batch(..., writer_id='orders-to-lake') or "
            ".option('writerId', 'orders-to-lake'). "
            "Keep it unchanged across restarts; use a different one for a different job."
        )


class CheckpointMismatchError(EosinkError):
    """A new checkpoint restarts batch ids below what this writer already committed."""


class BatchIdMismatchError(EosinkError):
    """Spark runs or commits another batch than the one eosink planned; nothing is committed."""


class ReplayMismatchError(EosinkError):
    """A replayed batch carries other data than the committed one (fingerprint differs)."""


class AlreadyCommitted(EosinkError):  # noqa: N818 - a signal, not a failure
    """Raised by a sink's ``commit`` when another attempt already committed this batch.

    The core then treats the attempt as skipped: it aborts the attempt's own leftovers and
    does not re-raise. A sink raises it only when it has *not* published anything itself.
    """


class SinkError(EosinkError):
    """A sink failed in a way it could describe; wraps the store's own error."""


class StagedRowsMismatchError(EosinkError):
    """The files Spark's writer staged hold other rows than the core counted; nothing is
    published (files of a task attempt that was not committed, or files lost)."""
