"""Finding sinks by name: clear errors for unknown and for known-but-missing sinks."""

from importlib.metadata import EntryPoint

import pytest

from eosink import UnknownSinkError, registry


@pytest.fixture
def only_memory_sink(monkeypatch):
    ep = EntryPoint(name="memory", value="sample_sinks:MemorySink", group=registry.GROUP)
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [ep] if group == registry.GROUP else []
    )
    registry.sink_class.cache_clear()
    yield
    registry.sink_class.cache_clear()


def test_unknown_name_lists_installed_sinks(only_memory_sink):
    with pytest.raises(UnknownSinkError, match=r"unknown sink 'nope'; installed sinks: memory"):
        registry.sink_class("nope")


def test_known_but_missing_sink_names_the_package(only_memory_sink):
    with pytest.raises(UnknownSinkError, match=r"pip install eosink-delta"):
        registry.sink_class("delta")


def test_installed_sink_loads_through_its_entry_point(only_memory_sink):
    from sample_sinks import MemorySink

    assert registry.sink_class("memory") is MemorySink
    sink = registry.sink_from_options("memory", {"Name": "t1"})
    assert isinstance(sink, MemorySink) and sink.options.name == "t1"


def test_plugin_manager_holds_one_sink_and_wrappers():
    from sample_sinks import MemorySink

    from eosink.logs import PhaseLogger

    pm = registry.plugin_manager(MemorySink(name="x"), [PhaseLogger()])
    assert len(pm.get_plugins()) == 2
    assert len(pm.hook.commit.get_hookimpls()) == 2
