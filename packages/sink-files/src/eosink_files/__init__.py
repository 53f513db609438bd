"""eosink sink: files through fsspec, with an atomic manifest log per batch.

The sink is found by name (``eosink.sink("files", path=...)``, ``.format("eosink-files")``).
This module also gives readers that do not honour Spark's manifest log the committed files
(:func:`committed_files`, :func:`dataset`, :func:`read_table`) and removes files of failed
attempts (:func:`cleanup`).
"""

from importlib.metadata import PackageNotFoundError, version

from eosink_files.cleanup import CleanupReport, cleanup
from eosink_files.log import ManifestError
from eosink_files.reader import CommittedFile, committed_files, dataset, read_log, read_table

try:
    __version__ = version("eosink-files") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"

__all__ = [
    "CleanupReport",
    "CommittedFile",
    "ManifestError",
    "cleanup",
    "committed_files",
    "dataset",
    "read_log",
    "read_table",
]
