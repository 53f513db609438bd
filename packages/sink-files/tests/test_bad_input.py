"""Bad input gets a clear error that names the fix, and nothing becomes visible."""

from __future__ import annotations

import os

import attrs

import pyarrow as pa
import pytest
from eosink_files import ManifestError, committed_files, read_table
from eosink_files.sink import FilesSink
from files_helpers import rows, run

from eosink import ConfigurationError, sink


def test_unknown_format():
    with pytest.raises(
        ConfigurationError, match="unknown format 'orc'; use one of parquet, json, csv"
    ):
        FilesSink(path="/tmp/x", format="orc")
    with pytest.raises(ConfigurationError, match="unknown format"):
        sink("files", path="/tmp/x", format="avro")


def test_unknown_option_and_compression():
    with pytest.raises(ConfigurationError, match="unknown option 'pth'.*known options"):
        FilesSink.from_options({"pth": "/tmp/x"})
    with pytest.raises(
        ConfigurationError, match="compression 'zstd' is not available for json; use"
    ):
        FilesSink(path="/tmp/x", format="json", compression="zstd")


def test_folder_with_foreign_files_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.csv").write_text("a,b\n")
    with pytest.raises(
        ConfigurationError,
        match="not an eosink-files or Spark file-sink folder.*new or empty folder",
    ):
        run(FilesSink(path=str(out)), 0)
    assert not (out / "_spark_metadata").exists()


def test_delta_table_is_refused(tmp_path):
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="Delta table"):
        run(FilesSink(path=str(tmp_path / "t")), 0)


def test_path_that_is_a_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigurationError, match="is a file; give a folder path"):
        run(FilesSink(path=str(tmp_path / "f")), 0)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty"),
        (b'v1\n{"path":"file:///x/part-0.parquet","si', "line 2 is not a complete JSON"),
        (b"v9\n", "not the log version 'v1'"),
        (b"\x00\x01garbage", "not the log version"),
    ],
    ids=["empty", "truncated", "version", "garbage"],
)
def test_corrupted_or_truncated_manifest(tmp_path, content, message):
    out = str(tmp_path / "out")
    run(FilesSink(path=out), 0)
    (tmp_path / "out" / "_spark_metadata" / "1").write_bytes(content)
    with pytest.raises(ManifestError, match=message) as err:
        run(FilesSink(path=out), 1)
    assert "Restore the file from a backup" in str(err.value)
    with pytest.raises(ManifestError, match=message):
        committed_files(out)


def test_missing_log_entry_is_reported(tmp_path):
    out = str(tmp_path / "out")
    for b in range(12):
        run(FilesSink(path=out), b)
    os.unlink(tmp_path / "out" / "_spark_metadata" / "9.compact")
    with pytest.raises(ManifestError, match=r"9.compact is missing.*compact_interval"):
        run(FilesSink(path=out), 12)


def test_partition_values_with_slash_and_dotdot_stay_inside(tmp_path):
    out = tmp_path / "out"
    values = ["a/b", "..", "../../escape", "x=y", None, "%2F"]
    batch = rows(0, n=len(values), day=values)
    run(FilesSink(path=str(out), partition_by=["day"]), 0, [[batch]])
    folders = sorted(os.listdir(out))
    assert folders == [
        "_spark_metadata",
        "day=%252F",
        "day=..",
        "day=..%2F..%2Fescape",
        "day=__HIVE_DEFAULT_PARTITION__",
        "day=a%2Fb",
        "day=x%3Dy",
    ]
    for root, _dirs, _files in os.walk(tmp_path):
        assert os.path.realpath(root).startswith(str(tmp_path))
    back = {r["id"]: r["day"] for r in read_table(str(out)).to_pylist()}
    assert back == dict(zip(batch.column("id").to_pylist(), values))


@pytest.mark.parametrize("column", ["a/b", "..", "."])
def test_partition_column_names_that_are_paths(column):
    with pytest.raises(ConfigurationError, match="cannot name a folder level.*rename the column"):
        FilesSink(path="/tmp/x", partition_by=[column])


def test_partition_column_not_in_stream(tmp_path):
    with pytest.raises(ConfigurationError, match=r"\['day'\] are not in the stream's columns"):
        run(FilesSink(path=str(tmp_path / "o"), partition_by=["day"]), 0)


def test_changing_format_or_layout_of_a_folder(tmp_path):
    out = str(tmp_path / "out")
    run(FilesSink(path=out), 0)
    with pytest.raises(ConfigurationError, match="holds parquet files but this sink writes json"):
        run(FilesSink(path=out, format="json"), 1)
    with pytest.raises(
        ConfigurationError, match="partitioned by \\[\\] but this sink partitions by \\['name'\\]"
    ):
        run(FilesSink(path=out, partition_by=["name"]), 1)


def test_filesystem_without_atomic_create_needs_single_writer(memory_url, monkeypatch):
    from eosink_files import fsspec_store as store_mod

    # a filesystem that cannot create a file only-if-absent atomically (e.g. plain HTTP, FTP)
    monkeypatch.setattr(store_mod.FsspecStore, "atomic_publish", lambda self: False)
    with pytest.raises(ConfigurationError, match="set single_writer=true"):
        run(FilesSink(path=memory_url), 0)
    assert run(FilesSink(path=memory_url, single_writer=True), 0).status == "committed"


def test_schema_column_all_partition_columns(tmp_path):
    batch = pa.record_batch({"day": pa.array(["a"])})
    with pytest.raises(ConfigurationError, match="leave at least one column out of partitionBy"):
        run(FilesSink(path=str(tmp_path / "o"), partition_by=["day"]), 0, [[batch]])


class _ConnectSession:
    @property
    def sparkContext(self):  # noqa: N802 - Spark's name
        raise RuntimeError("not available on Spark Connect")


class _ConnectLikeFrame:
    """A DataFrame of a Spark Connect session: no SparkContext to reach."""

    sparkSession = _ConnectSession()


def test_spark_file_writer_needs_a_classic_session(tmp_path):
    from eosink_files.options import FilesOptions
    from eosink_files.spark_file_writer import chooses_spark
    from eosink_files.store import open_store

    store = open_store(str(tmp_path))
    df = _ConnectLikeFrame()
    assert chooses_spark(FilesOptions(path=str(tmp_path)), store, df) is False
    with pytest.raises(ConfigurationError, match="Spark Connect.*file_writer='arrow'"):
        chooses_spark(FilesOptions(path=str(tmp_path), file_writer="spark"), store, df)
    with pytest.raises(ConfigurationError, match="unknown file_writer 'jvm'"):
        FilesOptions(path=str(tmp_path), file_writer="jvm")


def test_engine_is_the_old_name_of_file_writer(tmp_path):
    """``engine`` still works (Python keyword and Spark option); ``file_writer`` is the name."""
    from eosink_files.options import FilesOptions

    from eosink.plugin import options_from

    path = str(tmp_path)
    assert FilesOptions(path=path).file_writer == "auto"
    assert FilesOptions(path=path, engine="Arrow").file_writer == "arrow"
    assert options_from(FilesOptions, {"path": path, "engine": "spark"}).file_writer == "spark"
    assert options_from(FilesOptions, {"path": path, "fileWriter": "spark"}).file_writer == "spark"
    same = FilesOptions(path=path, file_writer="spark", engine="spark")
    assert same.file_writer == "spark" and same == FilesOptions(path=path, file_writer="spark")
    assert attrs.evolve(same, file_writer="arrow").file_writer == "arrow"
    assert "engine=" not in repr(same)


def test_file_writer_and_engine_that_disagree_are_an_error(tmp_path):
    from eosink_files.options import FilesOptions

    with pytest.raises(ConfigurationError, match="file_writer='spark' and engine='arrow' disagree"):
        FilesOptions(path=str(tmp_path), file_writer="spark", engine="arrow")
    with pytest.raises(ConfigurationError, match="disagree"):
        sink("files", path=str(tmp_path), fileWriter="arrow", engine="spark")


@pytest.mark.parametrize(
    "column",
    [
        pa.array([[1, 2]], pa.list_(pa.int64())),
        pa.array([{"a": 1}], pa.struct([("a", pa.int64())])),
        pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        # found by the generated histories (a CSV writer): bytes that are not UTF-8 failed
        # every task with a raw ArrowInvalid; Spark's CSV writer refuses binary columns
        pa.array([b"\xff\x00"], pa.binary()),
        pa.array([b"ok"], pa.large_binary()),
    ],
)
def test_nested_column_in_csv_is_refused_at_init_naming_it(tmp_path, column):
    """A list, struct, map or binary column cannot be CSV: refused before anything is
    written, naming the column."""
    out = tmp_path / "out"
    batch = pa.record_batch({"id": pa.array([1], pa.int64()), "nested": column})
    with pytest.raises(
        ConfigurationError, match="column 'nested' has type .*cannot be written as CSV"
    ):
        run(FilesSink(path=str(out), format="csv"), 0, [[batch]])
    assert not [p for p in out.rglob("*") if p.is_file()]
