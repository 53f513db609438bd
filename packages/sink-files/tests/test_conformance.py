"""The files sink passes the core's conformance kit on local files and on memory://."""

from __future__ import annotations

import pytest
from eosink_files import read_table
from eosink_files.sink import FilesSink

from eosink.testing.conformance import SinkConformance


class TestLocalFilesConformance(SinkConformance):
    @pytest.fixture
    def make_sink(self, tmp_path):
        return lambda: FilesSink(path=str(tmp_path / "out"))

    @pytest.fixture
    def read_rows(self, tmp_path):
        def read():
            if not (tmp_path / "out" / "_spark_metadata").exists():
                return []
            return read_table(str(tmp_path / "out")).to_pylist()

        return read


class TestFileUrlConformance(SinkConformance):
    """The same through a file:// URL, with a small compact interval so compaction runs."""

    @pytest.fixture
    def make_sink(self, tmp_path):
        return lambda: FilesSink(path=f"file://{tmp_path}/out", compact_interval=2)

    @pytest.fixture
    def read_rows(self, tmp_path):
        def read():
            if not (tmp_path / "out" / "_spark_metadata").exists():
                return []
            return read_table(f"file://{tmp_path}/out", compact_interval=2).to_pylist()

        return read


class TestMemoryConformance(SinkConformance):
    @pytest.fixture
    def make_sink(self, memory_url):
        return lambda: FilesSink(path=memory_url)

    @pytest.fixture
    def read_rows(self, memory_url):
        import fsspec

        def read():
            if not fsspec.filesystem("memory").exists(
                memory_url[len("memory://") :] + "/_spark_metadata"
            ):
                return []
            return read_table(memory_url).to_pylist()

        return read
