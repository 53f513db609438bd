"""Cleanup of what failed attempts leave behind: orphan data files and stale staging folders."""

from __future__ import annotations

import os
import time

import pytest
from deltalake import DeltaTable
from delta_helpers import rows, run
from eosink_delta.cleanup import ORPHAN, STAGING
from eosink_delta.sink import DeltaSink

import eosink_delta

DAY = 86400.0


def aged(*paths, days: float = 2) -> None:
    then = time.time() - days * DAY
    for p in paths:
        os.utime(p, (then, then))


@pytest.fixture
def table(tmp_path):
    """A table with one commit, and what two killed attempts (one old, one live) left."""
    path = tmp_path / "table"
    run(DeltaSink(path=str(path), partition_by=["day"]), 0, [rows(0, day=["a"] * 5)])
    old, young = path / "day=a" / "part-old.parquet", path / "day=a" / "part-young.parquet"
    old.write_bytes(b"PAR1")
    young.write_bytes(b"PAR1")
    staging = path / "_eosink_staging"
    (staging / "killed" / "day=a").mkdir(parents=True)
    (staging / "live").mkdir()
    killed_file = staging / "killed" / "day=a" / "part-0.parquet"
    killed_file.write_bytes(b"PAR1")
    aged(old, killed_file, killed_file.parent, killed_file.parent.parent)
    return str(path)


def rows_in(path):
    return DeltaTable(path).to_pyarrow_table().num_rows


def test_cleanup_dry_run_then_delete(table):
    report = eosink_delta.cleanup(table, older_than_s=DAY)
    assert report.paths(ORPHAN) == ("day=a/part-old.parquet",)
    assert report.paths(STAGING) == (os.path.join(table, "_eosink_staging", "killed"),)
    assert (
        not report.deleted
        and "would delete 1 orphan file(s), 1 staging folder(s)" in report.summary()
    )
    assert os.path.exists(os.path.join(table, "day=a", "part-old.parquet"))
    assert os.path.exists(os.path.join(table, "_eosink_staging", "killed"))

    report = eosink_delta.cleanup(table, older_than_s=DAY, dry_run=False)
    assert report.deleted and report.paths(ORPHAN) == ("day=a/part-old.parquet",)
    assert sorted(os.listdir(os.path.join(table, "day=a")))[-1] == "part-young.parquet"
    assert not os.path.exists(os.path.join(table, "day=a", "part-old.parquet"))
    assert os.listdir(os.path.join(table, "_eosink_staging")) == ["live"]
    assert rows_in(table) == 5


def test_vacuum_is_deltas_vacuum_plus_the_staging_it_skips(table):
    assert eosink_delta.vacuum(table, retention_hours=24).paths(ORPHAN) == (
        "day=a/part-old.parquet",
    )
    report = eosink_delta.vacuum(table, retention_hours=24, dry_run=False)
    assert report.deleted and len(report.paths(STAGING)) == 1
    assert os.listdir(os.path.join(table, "_eosink_staging")) == ["live"]
    assert rows_in(table) == 5


@pytest.fixture
def eosink_command():
    """The ``eosink`` command's ``main``; its logging set-up (stderr, WARNING) undone after."""
    from eosink.cli import main
    from eosink.logs import reset_logging

    yield main
    reset_logging()


def test_eosink_cleanup_delta_covers_the_retired_cleanup_command(table, capsys, eosink_command):
    """``eosink cleanup delta`` takes what ``python -m eosink_delta.cleanup`` took: the table,
    an age (``--older-than 24h`` for ``--older-than-hours 24``) and ``--delete``; it lists the
    orphan files and the stale staging folders alike."""
    main = eosink_command
    assert main(["cleanup", "delta", table, "--older-than", "24h"]) == 0
    out = capsys.readouterr().out
    assert "day=a/part-old.parquet" in out and "_eosink_staging/killed" in out
    assert "dry run: add --delete" in out
    assert os.path.exists(os.path.join(table, "day=a", "part-old.parquet"))
    assert main(["cleanup", "delta", table, "--older-than", "24h", "--delete"]) == 0
    assert "removed 2 leftover(s)" in capsys.readouterr().out
    assert not os.path.exists(os.path.join(table, "day=a", "part-old.parquet"))
    assert os.listdir(os.path.join(table, "_eosink_staging")) == ["live"]
    assert rows_in(table) == 5


def test_the_retired_cleanup_command_is_gone():
    import eosink_delta.cleanup

    assert not hasattr(eosink_delta.cleanup, "main")
