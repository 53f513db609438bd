"""eosink: exactly-once sinks for PySpark.

This namespace is what a pipeline author calls: find a sink (:func:`sink`,
:func:`installed_sinks`), run batches into it through a front door (:func:`foreach_batch`,
:func:`write_batch`, :func:`register_data_sources`), read what happened (:class:`BatchOutcome`),
route eosink's logs (:func:`configure_logging`), and catch its errors (:class:`EosinkError`
and the errors below it).

Sink authors implement against :mod:`eosink.plugin` (the hook contract, its messages, errors
and helpers) and test with :mod:`eosink.testing`. The other modules are the core's own.
"""

from __future__ import annotations

import warnings
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from eosink.errors import (
    CheckpointMismatchError,
    ConfigurationError,
    EosinkError,
    MissingWriterIdError,
    ReplayMismatchError,
    SinkError,
    UnknownSinkError,
)
from eosink.logs import configure_logging
from eosink.model import BatchOutcome
from eosink.registry import installed_sinks, sink
from eosink.spark import foreach_batch, write_batch
from eosink.spark import register as register_data_sources

try:
    __version__ = version("eosink") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"

__all__ = [
    "BatchOutcome",
    "CheckpointMismatchError",
    "ConfigurationError",
    "EosinkError",
    "MissingWriterIdError",
    "ReplayMismatchError",
    "SinkError",
    "UnknownSinkError",
    "configure_logging",
    "foreach_batch",
    "installed_sinks",
    "register_data_sources",
    "sink",
    "write_batch",
]

#: Names this namespace exported before it held only the user API, and where each lives now.
#: They keep working, with a DeprecationWarning, for one release (0.2.0 removes them).
_MOVED = {
    "AlreadyCommitted": "eosink.plugin",
    "BatchContext": "eosink.plugin",
    "PartitionGroups": "eosink.plugin",
    "Proof": "eosink.plugin",
    "Sink": "eosink.plugin",
    "Staged": "eosink.plugin",
    "crash_point": "eosink.plugin",
    "group_by_text": "eosink.plugin",
    "hookimpl": "eosink.plugin",
    "java_number_text": "eosink.plugin",
    "options_from": "eosink.plugin",
    "run_batch": "eosink.testing",
    # the core's internals: no promise beyond this release
    "Fingerprint": "eosink.model",
    "PartitionResult": "eosink.model",
    "PhaseLogger": "eosink.logs",
    "WriteTask": "eosink.protocol",
    "hookspec": "eosink.hookspecs",
    "sink_from_options": "eosink.registry",
}


def __getattr__(name: str) -> Any:
    """The old spellings of :data:`_MOVED`, with a warning naming the new import."""
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'eosink' has no attribute {name!r}")
    warnings.warn(
        f"eosink.{name} is deprecated and will be removed in eosink 0.2.0: "
        f"use `from {module} import {name}`",
        DeprecationWarning,
        stacklevel=2,
    )
    import importlib

    return getattr(importlib.import_module(module), name)
