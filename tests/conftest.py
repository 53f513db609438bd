"""Shared fixtures of the cross-package tests."""

import pytest


@pytest.fixture(scope="session")
def spark():
    from eosink.testing.spark import local_spark

    session = local_spark()
    yield session
    session.stop()
