"""Shared fixtures of the eosink-iceberg tests."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosink import installed_sinks


@pytest.fixture(scope="session")
def iceberg_entry_point(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The ``iceberg`` entry point, for tests whose queries find the sink by name (in their
    own processes too). Installed wheels and ``./pants test`` provide it; a plain pytest run on
    the source tree does not, so this writes a distribution's metadata for it onto the path."""
    if "iceberg" in installed_sinks():
        yield
        return
    root: Path = tmp_path_factory.mktemp("entry-points")
    info = root / "eosink_iceberg_source-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: eosink-iceberg-source\nVersion: 0\n"
    )
    (info / "entry_points.txt").write_text(
        "[eosink.sinks]\niceberg = eosink_iceberg.sink:IcebergSink\n"
    )
    sys.path.insert(0, str(root))
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), before) if p)
    import importlib

    importlib.invalidate_caches()
    assert "iceberg" in installed_sinks()
    yield
    sys.path.remove(str(root))
    if before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = before
