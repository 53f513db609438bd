"""Who writes an archive of Spark's classes, and when one is mapped (no Spark here: the JVM's
side is tests/test_spark_class_archive_spark.py)."""

from __future__ import annotations

import fcntl

import pytest

from eosink.testing import spark_class_archive as archives


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(archives.ENV, str(tmp_path))
    return tmp_path


def test_no_folder_no_archive(monkeypatch, tmp_path):
    monkeypatch.delenv(archives.ENV, raising=False)
    assert archives.archive_path("4.2.0", tmp_path) is None
    assert archives.java_options() == ""
    with archives.made_by_this_run(None) as (options, write_to):
        assert (options, write_to) == ("", None)


def test_the_key_is_the_install_and_the_version(folder, tmp_path):
    one, other = tmp_path / "one", tmp_path / "other"
    one.write_text("a")
    other.write_text("a")
    assert archives.archive_path("4.2.0", one) == archives.archive_path("4.2.0", one)
    assert archives.archive_path("4.2.0", one) != archives.archive_path("4.2.0", other)
    assert archives.archive_path("4.2.0", one).name.startswith("spark-4.2.0-")
    assert archives.archive_path("4.1.1", one).name.startswith("spark-4.1.1-")


def test_one_run_writes_it_the_others_go_on_without_then_all_map_it(folder):
    archive = folder / "spark-4.2.0-x.jsa"
    with archives.made_by_this_run(archive) as (options, write_to):
        assert (options, write_to) == ("", str(archive))
        with archives.made_by_this_run(archive) as meanwhile:
            assert meanwhile == ("", None)
        archive.write_bytes(b"classes")  # what the run's process publishes at its JVM's exit
    with archives.made_by_this_run(archive) as (options, write_to):
        assert options == f"-XX:SharedArchiveFile={archive} {archives.QUIET}"
        assert write_to is None


def test_a_process_holding_the_lock_keeps_the_others_from_writing(folder):
    archive = folder / "spark-4.2.0-x.jsa"
    with open(folder / ".lock", "w") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        with archives.made_by_this_run(archive) as (options, write_to):
            assert (options, write_to) == ("", None)
        archives.make_once(archive)  # does not wait, makes nothing
        assert not archive.exists()


def test_a_failed_making_is_not_tried_again(folder, monkeypatch):
    archive = folder / "spark-4.2.0-x.jsa"
    runs = []

    def fails(*args, **kwargs):
        runs.append(args)
        raise archives.subprocess.CalledProcessError(1, args[0])

    monkeypatch.setattr(archives.subprocess, "run", fails)
    archives.make_once(archive)
    archives.make_once(archive)
    assert len(runs) == 1 and not archive.exists()
    assert "returned non-zero exit status 1" in (folder / "spark-4.2.0-x.jsa.failed").read_text()
