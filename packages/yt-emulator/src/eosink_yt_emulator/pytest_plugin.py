"""pytest fixtures for testing YT pipelines against the emulator.

Enable with ``pytest_plugins = ["eosink_yt_emulator.pytest_plugin"]`` in the
top-level ``conftest.py``, or import the fixtures into any ``conftest.py``::

    from eosink_yt_emulator.pytest_plugin import yt_emulator, yt_client  # noqa: F401

Fixtures:

* ``yt_emulator``: a fresh in-process :class:`~eosink_yt_emulator.YtEmulator` per
  test (bound to a free port); use ``yt_emulator.client()`` for a configured real
  ``YtClient``, ``yt_emulator.faults`` to inject faults, ``yt_emulator.requests``
  for the request log, ``yt_emulator.url`` / ``.proxy`` for the address.
* ``yt_client``: ``yt_emulator.client()``.
* ``yt_emulator_process``: the emulator as a separate process (one per test), with
  the same ``.client()``, ``.faults`` (over the control endpoint), ``.url``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from .server import EmulatorProcess, YtEmulator

if TYPE_CHECKING:
    from yt.wrapper import YtClient


@pytest.fixture
def yt_emulator() -> Iterator[Any]:
    emu = YtEmulator().start()
    try:
        yield emu
    finally:
        emu.stop()


@pytest.fixture
def yt_client(yt_emulator: YtEmulator) -> YtClient:
    return yt_emulator.client()


@pytest.fixture
def yt_emulator_process() -> Iterator[Any]:
    proc = EmulatorProcess().start()
    try:
        yield proc
    finally:
        proc.stop()
