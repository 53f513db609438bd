"""The table's manifests as the driver's commits read them: each one decoded once.

An upsert's commit reads the entries of every live manifest three times: to plan the files
that may hold the batch's keys, to find the entries of the files it drops, and to keep or
rewrite each manifest in its snapshot. pyiceberg decodes a manifest anew each time (~1.8 ms
per manifest file, however few its entries, with the pure-Python Avro decoder this process
uses: :mod:`eosink_iceberg.avro_doubles`), so a batch's commit cost grew with the number of
manifests (a table with merging off gains one per batch), not with what the batch touches.

A manifest file is never changed once written (a commit that changes its entries writes a new
one, under a new name), so its entries can be kept by path: :data:`MANIFESTS` holds the
entries of the manifests the driver has read, up to :data:`WEIGHT_LIMIT` (the least recently
read go first), and a batch decodes only the manifests that are new to it. An entry weighs
one plus its columns with statistics: decoded, an entry of a 5-column table takes ~3.4 KB
(~570 bytes a unit, measured with tracemalloc), so the limit holds about 60 MB however wide
the table (~16,000 entries of that one; a table with more live files than the limit holds is
decoded as before, every commit). The entries handed out are shared: pyiceberg's writers copy
an entry to write it (``ManifestEntry.from_args``), never change it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus
from pyiceberg.table import ManifestGroupPlanner, _min_sequence_number
from pyiceberg.typedef import KeyDefaultDict

#: The most weight kept (module doc: ~60 MB).
WEIGHT_LIMIT = 100_000


def weight(entry: ManifestEntry) -> int:
    """One, plus the entry's columns with statistics (what its decoded size grows with)."""
    return 1 + len(entry.data_file.value_counts or entry.data_file.column_sizes or ())


class ManifestCache:
    """Manifest entries (deleted ones too) by manifest path, least recently read dropped
    first beyond ``limit`` (:func:`weight`); safe to read from pyiceberg's planning threads."""

    def __init__(self, limit: int = WEIGHT_LIMIT) -> None:
        self.limit = limit
        self._entries: OrderedDict[str, tuple[tuple[ManifestEntry, ...], int]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def entries(self, manifest: Any, io: Any, discard_deleted: bool = True) -> list[ManifestEntry]:
        """``manifest.fetch_manifest_entry(io, discard_deleted)``, decoded once."""
        path = manifest.manifest_path
        with self._lock:
            found = self._entries.get(path)
            if found is not None:
                self._entries.move_to_end(path)
        if found is None:
            held = tuple(manifest.fetch_manifest_entry(io, discard_deleted=False))
            found = (held, sum(weight(e) for e in held))
            with self._lock:
                if path not in self._entries:
                    self._entries[path] = found
                    self._held += found[1]
                while self._held > self.limit and len(self._entries) > 1:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self._held -= dropped
        held = found[0]
        if not discard_deleted:
            return list(held)
        return [e for e in held if e.status != ManifestEntryStatus.DELETED]


#: The driver's manifests (module doc).
MANIFESTS = ManifestCache()


class CachedPlanner(ManifestGroupPlanner):
    """pyiceberg's scan planning (partition summaries, partition values, column bounds,
    sequence numbers, delete files), reading the manifests through :data:`MANIFESTS`; a
    file ``may_hold`` (when set) refuses is left out before pyiceberg's evaluators run."""

    def __init__(self, *args: Any, may_hold: Callable[[Any], bool] | None = None, **kw: Any):
        super().__init__(*args, **kw)
        self.may_hold = may_hold

    def plan_manifest_entries(self, manifests: Iterable[Any]) -> Iterator[list[ManifestEntry]]:
        summaries = KeyDefaultDict(self._build_manifest_evaluator)
        kept = [m for m in manifests if summaries[m.partition_spec_id](m)]
        partitions = KeyDefaultDict(self._build_partition_evaluator)
        metrics = self._build_metrics_evaluator()
        first = _min_sequence_number(kept)
        for manifest in kept:
            if not self._check_sequence_number(first, manifest):
                continue
            in_partition = partitions[manifest.partition_spec_id]
            entries = MANIFESTS.entries(manifest, self.io)
            if self.may_hold is not None:
                entries = [e for e in entries if self.may_hold(e.data_file)]
            yield [e for e in entries if in_partition(e.data_file) and metrics(e.data_file)]
