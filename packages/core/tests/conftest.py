"""Shared fixtures of eosink's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eosink.logs import reset_logging


@pytest.fixture(autouse=True)
def _logging_left_as_found() -> Iterator[None]:
    """A test that configures eosink's logging (the CLI does) leaves none of it to the next."""
    yield
    reset_logging()
