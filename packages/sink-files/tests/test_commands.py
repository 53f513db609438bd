"""The files sink's answers to ``eosink status|verify|cleanup`` (its operator hooks)."""

from __future__ import annotations

import os
import time

import pytest

from eosink_files.cleanup import FOREIGN, ORPHAN
from eosink_files.sink import FilesSink
from files_helpers import run


def test_status_verify_and_cleanup_of_a_written_folder(tmp_path):
    out = tmp_path / "out"
    sink = FilesSink(path=str(out))
    for batch in range(3):
        run(sink, batch, writer="orders")
    run(sink, 0, writer="backfill")

    status = sink.target_status()
    assert [(p.writer_id, p.batch_id) for p in status.writers] == [("backfill", 0), ("orders", 2)]
    assert status.details["manifest_latest_entry"] == 3
    assert status.details["committed_files"] == 8 and status.details["format"] == "parquet"

    assert sink.verify_target().ok and sink.verify_target().checked == 8

    orphan = out / "part-00009-dead-0-c000.snappy.parquet"
    orphan.write_bytes(b"PAR1")
    old = time.time() - 7200
    os.utime(orphan, (old, old))
    (out / "notes.txt").write_text("mine")
    dry = sink.cleanup_target(older_than_s=3600, delete=False)
    assert dry.paths(ORPHAN) == (orphan.name,) and dry.removable[0].size == 4
    assert dry.removable[0].age_s >= 7200 and dry.paths(FOREIGN) == ("notes.txt",)
    assert (
        dry.summary() == "would delete 1 orphan file(s), 4 bytes; kept 1 foreign file(s), 4 bytes"
    )
    done = sink.cleanup_target(older_than_s=3600, delete=True)
    assert done.deleted and not orphan.exists() and (out / "notes.txt").exists()

    victim = sorted(out.glob("part-*"))[0]
    victim.unlink()
    broken = sink.verify_target()
    assert len(broken.problems) == 1 and broken.problems[0].startswith(f"missing: {victim.name}")


@pytest.fixture
def eosink_command():
    """The ``eosink`` command's ``main``; its logging set-up (stderr, WARNING) undone after."""
    from eosink.cli import main
    from eosink.logs import reset_logging

    yield main
    reset_logging()


def test_eosink_cleanup_files_covers_the_retired_cleanup_command(tmp_path, capsys, eosink_command):
    """``eosink cleanup files`` takes what ``python -m eosink_files.cleanup`` took: the folder,
    an age (``--older-than`` for ``--older-than-hours``), ``--delete``, and the compact
    interval (``-o compactInterval=N`` for ``--compact-interval N``)."""
    main = eosink_command
    out = tmp_path / "out"
    sink = FilesSink(path=str(out), compact_interval=3)
    for batch in range(4):  # a .compact at log id 2
        run(sink, batch)
    old = out / "part-00009-dead-0-c000.snappy.parquet"
    young = out / "part-00009-live-0-c000.snappy.parquet"
    for f in (old, young):
        f.write_bytes(b"PAR1")
    past = time.time() - 3 * 3600
    os.utime(old, (past, past))
    (out / "notes.txt").write_text("mine")
    args = ["cleanup", "files", str(out), "--older-than", "2h", "-o", "compactInterval=3"]

    assert main(args) == 0
    dry = capsys.readouterr().out
    assert old.name in dry and young.name not in dry.split("kept")[0]
    assert "dry run: add --delete" in dry and old.exists()

    assert main([*args, "--delete"]) == 0
    done = capsys.readouterr().out
    assert "removed 1 leftover(s)" in done and "notes.txt" in done
    assert not old.exists() and young.exists() and (out / "notes.txt").exists()
    assert sink.verify_target().ok


def test_the_retired_cleanup_command_is_gone():
    import eosink_files.cleanup

    assert not hasattr(eosink_files.cleanup, "main")
