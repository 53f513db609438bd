"""Checks that a sink keeps its store's secret to itself: out of its reprs and out of the logs.

    with debug_logs(capsys, caplog) as logs:
        sink = eosink.sink("files", path=..., storage_options={"secret": secret, ...})
        assert_masked(sink, secret)
        ...  # write, fail, read proofs
    assert secret not in logs.text
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from eosink.logs import configure_logging, reset_logging


@attrs.define
class CapturedLogs:
    """Everything written to stdout, stderr and the log records inside :func:`debug_logs`;
    filled in when the block ends."""

    text: str = ""


@contextmanager
def debug_logs(capsys: Any, caplog: Any) -> Iterator[CapturedLogs]:
    """eosink's logs at DEBUG, as JSON (every field a record carries), for the block; pytest's
    ``capsys`` and ``caplog`` catch them, and the yielded :class:`CapturedLogs` holds them
    after the block."""
    logs = CapturedLogs()
    configure_logging(json=True, level=logging.DEBUG)
    try:
        yield logs
    finally:
        reset_logging()
    captured = capsys.readouterr()
    logs.text = captured.out + captured.err + caplog.text


def assert_masked(sink: Any, secret: str) -> None:
    """Neither the sink's repr nor its options' holds ``secret``; the options show a mask."""
    assert secret not in repr(sink) and secret not in repr(sink.options)
    assert "***" in repr(sink.options)
