"""Sinks are found by name through their entry points; wrong names get errors that help."""

import pytest

import eosink
from eosink import UnknownSinkError
from eosink.registry import sink_class


def test_sink_by_name_comes_from_its_entry_point(tmp_path):
    sqlite = eosink.sink("sqlite", path=str(tmp_path / "t.db"))
    assert type(sqlite).__module__ == "eosink_sqlite.sink" and sqlite.name == "sqlite"


def test_unknown_sink_name_lists_the_installed_ones():
    with pytest.raises(UnknownSinkError) as error:
        sink_class("sqlight")
    assert "unknown sink 'sqlight'" in str(error.value)
    for name in ("files", "delta", "sqlite", "yt-dynamic", "yt-static"):
        assert name in str(error.value)


def test_unknown_option_of_a_real_sink_lists_its_options(tmp_path):
    with pytest.raises(eosink.ConfigurationError, match=r"unknown option 'tabel'.*table"):
        eosink.sink("sqlite", path=str(tmp_path / "t.db"), tabel="x")


def test_sources_are_registered_through_their_entry_point_group(monkeypatch):
    """eosink.register_data_sources registers the sinks' data sources and every installed
    source of the eosink.sources group (a stand-in session records what Spark would get; it
    runs no jobs, so the executors' probe is switched off)."""
    from types import SimpleNamespace

    from eosink.spark.executor_env import SKIP_ENV

    monkeypatch.setenv(SKIP_ENV, "0")

    from eosink.registry import installed_sources

    assert installed_sources()["yt-queue"].value == "eosink_yt_queue.source:YtQueueDataSource"
    registered = []
    names = eosink.register_data_sources(
        SimpleNamespace(dataSource=SimpleNamespace(register=registered.append))
    )
    assert "eosink-yt-queue" in names and "eosink-sqlite" in names
    assert [cls.name() for cls in registered] == names
