"""The manifest log: Spark's reader rules, compaction, complete mode, several writers, cleanup."""

from __future__ import annotations

import os
import time

import pytest
from eosink_files import cleanup, committed_files, read_log, read_table
from eosink_files.cleanup import FOREIGN, ORPHAN, YOUNG
from eosink_files.log import derive_compact_interval, log_files, reader_interval, reader_plan
from eosink_files.manifest_commit import placement
from eosink_files.sink import FilesSink
from files_helpers import rows, run

from eosink.plugin import BatchContext
from eosink.registry import plugin_manager


def names(out):
    return sorted(
        os.listdir(os.path.join(out, "_spark_metadata")), key=lambda n: int(n.split(".")[0])
    )


# -- Spark's reader rules ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("default", "latest", "expected"),
    [(10, 9, 10), (10, 19, 20), (10, 39, 10), (10, 0, 1), (10, 100, 101), (5, 99, 5)],
)
def test_derive_compact_interval_is_sparks(default, latest, expected):
    assert derive_compact_interval(default, latest) == expected


def test_reader_plan_mirrors_spark():
    files = log_files([*map(str, range(9)), "9.compact", *map(str, range(10, 14))])
    assert reader_interval(files, 10) == 10
    assert reader_plan(files, 10) == [(9, True), (10, False), (11, False), (12, False), (13, False)]
    assert reader_plan(log_files(["0", "1"]), 10) == [(0, False), (1, False)]
    assert reader_plan(log_files(["5.compact"]), 10) == [(5, True)]


def test_placement_of_compacts():
    plain = {i: False for i in range(9)}
    assert placement(plain, 9, "append", 10) == (9, True, [])
    assert placement({**plain, 9: True}, 10, "append", 10) == (10, False, [])
    # complete mode: the compact must be read alone; empty deltas fill the ids before it
    assert placement({**plain, 9: True, 10: False, 11: False}, 12, "complete", 10) == (
        14,
        True,
        [12, 13],
    )
    assert placement({}, 0, "complete", 10) == (0, True, [])


# -- compaction ----------------------------------------------------------------------------------
def test_compacts_where_sparks_reader_expects_them(tmp_path):
    out = str(tmp_path / "out")
    for b in range(25):
        run(FilesSink(path=out), b)
    assert "9.compact" in names(out) and "19.compact" in names(out)
    assert "10" in names(out) and "24" in names(out)
    assert len(committed_files(out)) == 50
    assert read_table(out).num_rows == 25 * 8


def test_old_log_files_expire_but_skip_evidence_stays(tmp_path):
    out = str(tmp_path / "out")
    for b in range(35):
        run(FilesSink(path=out, log_cleanup_delay_s=0), b)
    left = names(out)
    assert left[0] == "19.compact" and "9.compact" not in left and "5" not in left
    assert read_table(out).num_rows == 35 * 8
    sink = FilesSink(path=out)
    proof = plugin_manager(sink).hook.is_committed(ctx=BatchContext("files", "w", 3, query_id="q1"))
    assert proof is not None and proof.batch_id >= 3
    assert run(FilesSink(path=out), 3).status == "skipped"


def test_compaction_copies_entries_without_change(tmp_path):
    out = str(tmp_path / "out")
    for b in range(10):
        run(FilesSink(path=out), b)
    before = {f.uri for f in committed_files(out)}
    compact = open(os.path.join(out, "_spark_metadata", "9.compact")).read().splitlines()
    assert compact[0] == "v1"
    proofs = [line for line in compact if line.startswith('{"eosink":{"proof":')]
    assert len(proofs) == 10  # the latest proofs of the writer are carried forward
    assert compact[-1].startswith('{"eosink":{"end":9}')  # the closing line
    assert len(before) == 20


# -- several writers -----------------------------------------------------------------------------
def test_two_writers_share_a_folder(tmp_path):
    out = str(tmp_path / "out")
    for b in range(3):
        assert run(FilesSink(path=out), b, writer="a").status == "committed"
        assert run(FilesSink(path=out), b, writer="b", query="q2").status == "committed"
    assert run(FilesSink(path=out), 2, writer="a").status == "skipped"
    assert names(out) == [str(i) for i in range(6)]
    state = read_log(out)
    assert sorted({(p.proof.writer_id, p.proof.batch_id) for p in state.proofs}) == [
        (w, b) for w in "ab" for b in range(3)
    ]


# -- complete mode -------------------------------------------------------------------------------
def test_complete_mode_replaces_everything_in_one_step(tmp_path):
    out = str(tmp_path / "out")
    for b in range(3):
        run(FilesSink(path=out), b, mode="complete")
        assert sorted(read_table(out).column("id").to_pylist()) == sorted(
            rows(b, 0).column("id").to_pylist() + rows(b, 1).column("id").to_pylist()
        )
    assert names(out) == ["0.compact", "1.compact", "2.compact"]


def test_complete_after_appends(tmp_path):
    out = str(tmp_path / "out")
    for b in range(12):
        run(FilesSink(path=out), b)
    run(FilesSink(path=out), 12, mode="complete")
    assert sorted(read_table(out).column("id").to_pylist()) == [
        12000,
        12001,
        12002,
        12003,
        12100,
        12101,
        12102,
        12103,
    ]
    assert "14.compact" in names(out)


# -- formats -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fmt", "compression"),
    [
        ("parquet", "zstd"),
        ("parquet", "none"),
        ("json", "none"),
        ("json", "gzip"),
        ("csv", "none"),
        ("csv", "gzip"),
    ],
)
def test_formats(tmp_path, fmt, compression):
    out = str(tmp_path / "out")
    run(FilesSink(path=out, format=fmt, compression=compression), 0)
    files = committed_files(out)
    assert files and all(f".{fmt}" in f.relpath for f in files)
    assert sorted(read_table(out).column("id").to_pylist()) == [0, 1, 2, 3, 100, 101, 102, 103]


def test_row_groups_and_file_rolling(tmp_path):
    import pyarrow.parquet as pq

    out = str(tmp_path / "out")
    batches = [rows(0, 0, n=1000) for _ in range(10)]
    run(FilesSink(path=out, row_group_size=2500, target_file_size=1), 0, [batches])
    files = committed_files(out)
    assert len(files) == 4  # each flush of 2,500 rows fills a file past 1 byte
    meta = pq.ParquetFile(os.path.join(out, files[0].relpath)).metadata
    assert meta.num_row_groups == 1 and meta.num_rows == 3000 or meta.num_rows == 2500


# -- orphan cleanup ------------------------------------------------------------------------------
def test_cleanup_removes_failed_attempts_only(tmp_path):
    out = tmp_path / "out"
    run(FilesSink(path=str(out)), 0)
    orphan = out / "part-00001-deadbeef-0-c000.snappy.parquet"
    orphan.write_bytes(b"PAR1")
    young = out / "part-00002-deadbeef-0-c000.snappy.parquet"
    young.write_bytes(b"PAR1")
    (out / "notes.txt").write_text("mine")
    old = time.time() - 7200
    os.utime(orphan, (old, old))
    dry = cleanup(str(out), older_than_s=3600)
    assert dry.paths(ORPHAN) == (orphan.name,) and dry.paths(YOUNG) == (young.name,)
    assert "notes.txt" in dry.paths(FOREIGN) and orphan.exists() and not dry.deleted
    done = cleanup(str(out), older_than_s=3600, dry_run=False)
    assert done.deleted and not orphan.exists() and young.exists() and (out / "notes.txt").exists()
    assert read_table(str(out)).num_rows == 8


def test_cleanup_removes_stale_staging_folders_of_the_spark_file_writer(tmp_path):
    out = tmp_path / "out"
    run(FilesSink(path=str(out)), 0)
    stale = out / "_eosink_staging" / "a1" / "country=DE"
    stale.mkdir(parents=True)
    (stale / "part-00000-x-c000.snappy.parquet").write_bytes(b"PAR1")
    (stale / ".part-00000-x-c000.snappy.parquet.crc").write_bytes(b"crc")
    live = out / "_eosink_staging" / "a2"
    live.mkdir()
    (live / "part-00000-y-c000.snappy.parquet").write_bytes(b"PAR1")
    old = time.time() - 7200
    for path in (
        stale / "part-00000-x-c000.snappy.parquet",
        stale / ".part-00000-x-c000.snappy.parquet.crc",
        stale,
        stale.parent,
    ):
        os.utime(path, (old, old))
    dry = cleanup(str(out), older_than_s=3600)
    assert len(dry.paths(ORPHAN)) == 2 and dry.paths(YOUNG) == (
        "_eosink_staging/a2/part-00000-y-c000.snappy.parquet",
    )
    cleanup(str(out), older_than_s=3600, dry_run=False)
    assert sorted(os.listdir(out / "_eosink_staging")) == ["a2"]
    assert read_table(str(out)).num_rows == 8


def test_abort_removes_the_attempts_files(tmp_path):
    from eosink.testing.faults import FaultPlugin, InjectedCrash
    from eosink.testing import run_batch
    from eosink.testing.local import LocalRunner

    out = tmp_path / "out"
    sink = FilesSink(path=str(out))
    ctx = BatchContext("files", "w", 0, query_id="q1")
    parts = [[rows(0, p)] for p in range(2)]
    with pytest.raises(InjectedCrash):
        run_batch(
            sink,
            ctx,
            parts[0][0].schema,
            LocalRunner(parts),
            plugins=[FaultPlugin("before_commit")],
        )
    assert [n for n in os.listdir(out) if n.startswith("part-")] == []
    # after a commit that went through, abort keeps the files
    with pytest.raises(InjectedCrash):
        run_batch(
            sink, ctx, parts[0][0].schema, LocalRunner(parts), plugins=[FaultPlugin("after_commit")]
        )
    assert len([n for n in os.listdir(out) if n.startswith("part-")]) == 2
