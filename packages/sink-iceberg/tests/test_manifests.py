"""The driver's decoded manifests (:mod:`eosink_iceberg.manifests`): each decoded once, the
least recently read dropped beyond the limit (an entry weighing one plus its columns with
statistics), deleted entries left out unless asked for."""

from __future__ import annotations

from typing import Any

import attrs
from eosink_iceberg.manifests import ManifestCache
from pyiceberg.manifest import ManifestEntryStatus


@attrs.define
class File:
    value_counts: dict[int, int] | None = None
    column_sizes: dict[int, int] | None = None


@attrs.define
class Entry:
    status: Any
    data_file: File = attrs.field(factory=File)


@attrs.define
class Manifest:
    manifest_path: str
    entries: list[Entry]
    reads: int = 0

    def fetch_manifest_entry(self, io: Any, discard_deleted: bool = True) -> list[Entry]:
        self.reads += 1
        return [e for e in self.entries if not discard_deleted or e.status.value != 2]


def manifest(path: str, live: int, deleted: int = 0) -> Manifest:
    entries = [Entry(ManifestEntryStatus.ADDED) for _ in range(live)]
    return Manifest(path, entries + [Entry(ManifestEntryStatus.DELETED) for _ in range(deleted)])


def test_a_manifest_is_decoded_once_and_its_deleted_entries_kept_apart():
    cache = ManifestCache()
    m = manifest("m1.avro", live=3, deleted=2)
    assert len(cache.entries(m, io=None)) == 3
    assert len(cache.entries(m, io=None, discard_deleted=False)) == 5
    assert len(cache.entries(m, io=None)) == 3
    assert m.reads == 1


def test_the_least_recently_read_go_first_beyond_the_limit():
    cache = ManifestCache(limit=10)  # entries without statistics weigh one each
    a, b, c = manifest("a", 4), manifest("b", 4), manifest("c", 4)
    cache.entries(a, None)
    cache.entries(b, None)
    cache.entries(a, None)  # a read again: b is now the least recent
    cache.entries(c, None)  # 12 entries > 10: b goes
    cache.entries(a, None)
    cache.entries(b, None)
    assert (a.reads, b.reads, c.reads) == (1, 2, 1)


def test_a_manifest_larger_than_the_limit_is_still_read_whole():
    cache = ManifestCache(limit=2)
    big = manifest("big", 5)
    assert len(cache.entries(big, None)) == 5
    assert len(cache.entries(big, None)) == 5


def test_an_entry_weighs_one_plus_its_columns_with_statistics():
    cache = ManifestCache(limit=12)
    wide = manifest("wide", 2)
    for entry in wide.entries:
        entry.data_file = File(value_counts={1: 5, 2: 5, 3: 5, 4: 5})  # 5 each: 10
    narrow = manifest("narrow", 2)  # 2: 12 in all
    cache.entries(wide, None)
    cache.entries(narrow, None)
    cache.entries(narrow, None)
    assert (wide.reads, narrow.reads) == (1, 1)
    cache.entries(manifest("more", 1), None)  # 13 > 12: the wide one, least recent, goes
    cache.entries(narrow, None)
    cache.entries(wide, None)
    assert (wide.reads, narrow.reads) == (2, 1)
