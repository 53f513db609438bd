"""``eosink cleanup|status|verify iceberg``: orphans of failed attempts found (dry run), kept
while young, removed with ``delete``; committed files, files of older snapshots and files
eosink did not write are never touched."""

from __future__ import annotations

import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, load, read_pyiceberg, rows, run

from eosink.plugin import BatchContext
from eosink.protocol import prepare
from eosink.registry import plugin_manager


@pytest.mark.parametrize("file_io", ["pyarrow", "fsspec"])
def test_cleanup_finds_then_removes_orphans_only(tmp_path, file_io):
    """Through pyiceberg's PyArrow FileIO (the default) and its fsspec one, which lists the
    data folder through fsspec: the cleanup failed on it before, seen by the simulation."""
    catalog = catalog_properties(tmp_path)
    if file_io == "fsspec":
        catalog["py-io-impl"] = "pyiceberg.io.fsspec.FsspecFileIO"
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True)
    assert run(sink, 0).status == "committed"
    assert run(sink, 1, mode="complete").status == "committed"  # batch 0's file: older snapshot
    # a driver killed after its executors wrote batch 2: no commit, no abort
    pm = plugin_manager(IcebergSink(table=TABLE, catalog=catalog))
    ctx = BatchContext(sink="iceberg", writer_id="w", batch_id=2, query_id="q")
    state = prepare(pm, ctx, rows(2).schema).state
    pm.hook.write(ctx=ctx, state=state, partition_id=0, attempt=9, batches=iter([rows(2)]))
    data = tmp_path / "warehouse" / "lake" / "events" / "data"
    foreign = data / "00000-0-written-by-someone-else.parquet"
    foreign.write_bytes(b"not ours")
    listed = {t.file.file_path.rsplit("/", 1)[-1] for t in load(catalog).scan().plan_files()}
    all_files = {p.name for p in data.iterdir()}
    orphans = all_files - listed - {foreign.name}
    assert (
        len(orphans) == 2
    )  # the crashed attempt's file and batch 0's, which an older snapshot lists
    pm = plugin_manager(sink)

    young = pm.hook.cleanup_target(older_than_s=10**9, delete=False)
    assert not young.removable and len(young.kept) == 1

    dry = pm.hook.cleanup_target(older_than_s=0, delete=False)
    assert len(dry.removable) == 1  # only the crashed attempt's: batch 0's is in a snapshot
    crashed = dry.removable[0].path.rsplit("/", 1)[-1]
    assert crashed in orphans
    assert {p.name for p in data.iterdir()} == all_files  # a dry run removes nothing

    done = pm.hook.cleanup_target(older_than_s=0, delete=True)
    assert done.deleted and len(done.removable) == 1
    left = {p.name for p in data.iterdir()}
    assert left == all_files - {done.removable[0].path.rsplit("/", 1)[-1]}
    assert foreign.name in left
    assert sorted(read_pyiceberg(catalog).column("id").to_pylist()) == list(range(1000, 1005))

    status = pm.hook.target_status()
    assert [(p.writer_id, p.batch_id) for p in status.writers] == [("w", 1)]
    assert status.details["snapshots"] >= 2
    assert pm.hook.verify_target().ok


def test_verify_reports_a_missing_file(tmp_path):
    catalog = catalog_properties(tmp_path)
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True)
    assert run(sink, 0).status == "committed"
    path = next(iter(load(catalog).scan().plan_files())).file.file_path.removeprefix("file://")
    import os

    os.remove(path)
    result = plugin_manager(sink).hook.verify_target()
    assert not result.ok and "missing" in result.problems[0]


def test_cleanup_keeps_the_files_of_another_table_sharing_the_data_folder(tmp_path):
    """After a rename, pyiceberg gives a new table of the old name the old location: two tables
    share one data folder. A file is an orphan only if no table of the catalog that uses the
    folder lists it; the renamed table's live files must survive ``cleanup --delete``."""
    from pyiceberg.catalog import load_catalog

    catalog = catalog_properties(tmp_path)
    old = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True)
    assert run(old, 0).status == "committed"
    load_catalog("eosink", **catalog).rename_table(TABLE, "lake.events_2025")
    renamed = IcebergSink(table="lake.events_2025", catalog=catalog)
    assert run(renamed, 1).status == "committed"
    new = IcebergSink(table=TABLE, catalog=catalog)  # created anew at the old location
    assert run(new, 0).status == "committed"
    assert load(catalog).metadata.location == load(catalog, "lake.events_2025").metadata.location
    # a crashed attempt of the new table: its file is the only orphan
    pm = plugin_manager(IcebergSink(table=TABLE, catalog=catalog))
    ctx = BatchContext(sink="iceberg", writer_id="w", batch_id=1, query_id="q")
    state = prepare(pm, ctx, rows(1).schema).state
    pm.hook.write(ctx=ctx, state=state, partition_id=0, attempt=3, batches=iter([rows(1)]))

    for sink in (new, renamed):
        done = plugin_manager(sink).hook.cleanup_target(older_than_s=0, delete=True)
        assert len(done.removable) <= 1, done.removable
    for name, ids in ((TABLE, range(5)), ("lake.events_2025", [*range(5), *range(1000, 1005)])):
        assert sorted(read_pyiceberg(catalog, name).column("id").to_pylist()) == list(ids)
        assert plugin_manager(IcebergSink(table=name, catalog=catalog)).hook.verify_target().ok
    data = tmp_path / "warehouse" / "lake" / "events" / "data"
    listed = {
        t.file.file_path.rsplit("/", 1)[-1]
        for name in (TABLE, "lake.events_2025")
        for t in load(catalog, name).scan().plan_files()
    }
    assert {p.name for p in data.iterdir()} == listed  # the crashed attempt's file is gone
