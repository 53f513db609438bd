"""Fixtures of the yt-static tests: an emulated YT proxy and sinks pointed at it."""

from __future__ import annotations

import pytest

# The emulator's fixtures (an emulated YT proxy per test); imported, so the dependency is visible.
from eosink_yt_emulator.pytest_plugin import yt_client, yt_emulator  # noqa: F401

TABLE = "//home/eosink/target"


@pytest.fixture
def make_sink(yt_emulator):
    from eosink_yt_static.sink import YtStaticSink

    def make(**options):
        options.setdefault("path", TABLE)
        return YtStaticSink(proxy=yt_emulator.url, proxy_discovery=False, **options)

    return make


@pytest.fixture
def yt(yt_emulator):
    """A client for checking the emulator's state independently of the sink."""
    return yt_emulator.client()
