"""What a batch's commit does about the table's history (:mod:`eosink_iceberg.history`):
``keep_snapshots`` expires old snapshots in the batch's own commit, and the proof, a table
property, survives it; a table with ``commit.manifest-merge.enabled`` gets merge appends."""

from __future__ import annotations

import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, load, read_checked, run

from eosink import ConfigurationError


def ids(catalog):
    return sorted(read_checked(catalog).column("id").to_pylist())


def expected(batches):
    return sorted(b * 1000 + i for b in batches for i in range(5))


def test_keep_snapshots_bounds_the_history_and_the_proof_survives(tmp_path):
    catalog = catalog_properties(tmp_path)
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, keep_snapshots=3)
    for batch in range(6):
        assert run(sink, batch).status == "committed"
    table = load(catalog)
    assert len(table.metadata.snapshots) == 3
    assert len(table.metadata.snapshot_log) == 3
    assert ids(catalog) == expected(range(6))
    # the snapshots of batches 0-2 (and their summaries' proofs) are gone; the property is not
    for batch in (0, 2, 5):
        assert run(sink, batch).status == "skipped"
    assert run(sink, 6).status == "committed"
    assert ids(catalog) == expected(range(7))


def test_keep_snapshots_in_complete_mode_and_tags_stay(tmp_path):
    catalog = catalog_properties(tmp_path)
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, keep_snapshots=1)
    assert run(sink, 0).status == "committed"
    tagged = load(catalog).metadata.current_snapshot().snapshot_id
    load(catalog).manage_snapshots().create_tag(tagged, "first").commit()
    for batch in (1, 2):
        assert run(sink, batch, mode="complete").status == "committed"
    table = load(catalog)
    current = table.metadata.current_snapshot().snapshot_id
    assert {s.snapshot_id for s in table.metadata.snapshots} == {tagged, current}
    assert ids(catalog) == expected([2])  # complete mode: the last batch only
    tag_rows = load(catalog).scan(snapshot_id=tagged).to_arrow().column("id").to_pylist()
    assert sorted(tag_rows) == expected([0])


def test_a_table_that_merges_manifests_gets_merge_appends(tmp_path):
    catalog = catalog_properties(tmp_path)
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True)
    assert run(sink, 0).status == "committed"
    with load(catalog).transaction() as txn:
        txn.set_properties(
            {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "3"}
        )
    for batch in range(1, 8):
        assert run(sink, batch).status == "committed"
    table = load(catalog)
    manifests = table.metadata.current_snapshot().manifests(table.io)
    assert len(manifests) < 4, len(manifests)  # a fast append each would leave 8
    assert ids(catalog) == expected(range(8))
    assert run(sink, 7).status == "skipped"


def test_keep_snapshots_must_not_be_negative(tmp_path):
    with pytest.raises(ConfigurationError, match="keep_snapshots"):
        IcebergSink(table=TABLE, catalog=catalog_properties(tmp_path), keep_snapshots=-1)
