"""Every sink in the repo is discoverable through the eosink.sinks entry point group."""

import inspect
from importlib.metadata import entry_points

import pytest

EXPECTED_SINKS = ["delta", "files", "iceberg", "postgres", "sqlite", "yt-dynamic", "yt-static"]


@pytest.fixture(scope="module")
def sinks():
    return {ep.name: ep for ep in entry_points(group="eosink.sinks")}


def test_every_sink_is_registered(sinks):
    missing = sorted(set(EXPECTED_SINKS) - set(sinks))
    assert not missing, f"not in the eosink.sinks entry points: {missing}; found {sorted(sinks)}"


@pytest.mark.parametrize("name", EXPECTED_SINKS)
def test_sink_entry_point_loads_to_a_class(sinks, name):
    if name not in sinks:
        pytest.fail(f"{name!r} is not in the eosink.sinks entry points")
    assert inspect.isclass(sinks[name].load())
