"""The executor probe's verdicts (the probe itself runs on a cluster: tests/test_cluster_*)."""

from __future__ import annotations

import pytest

from eosink.spark.executor_env import ExecutorEnvironmentError, Requirement, check_reports

EOSINK = Requirement("eosink.spark.datasource", "eosink", "eosink")
DELTA = Requirement("eosink_delta.sink", "eosink-delta", "sink 'delta'")


def report(**found):
    return {"python": "/usr/bin/python3", "host": "node-1", "found": found}


def test_all_there_passes():
    check_reports(
        [report(**{EOSINK.module: {"version": None}, DELTA.module: {"version": None}})],
        [EOSINK, DELTA],
    )


def test_missing_eosink_names_it_the_python_and_the_fixes():
    no_eosink = {"error": "ModuleNotFoundError: No module named 'eosink'"}
    no_sink = {"error": "ModuleNotFoundError: No module named 'eosink_delta'"}
    with pytest.raises(ExecutorEnvironmentError) as error:
        check_reports(
            [report(**{EOSINK.module: no_eosink, DELTA.module: no_sink})], [EOSINK, DELTA]
        )
    text = str(error.value)
    assert "lacks eosink, eosink-delta," in text
    assert "/usr/bin/python3" in text and "nothing was written" in text
    for fix in ("PYSPARK_PYTHON", "pip install", "spark.archives", "pex"):
        assert fix in text


def test_a_missing_dependency_of_a_sink_is_named():
    missing = {"error": "ModuleNotFoundError: No module named 'deltalake'"}
    with pytest.raises(ExecutorEnvironmentError, match="lacks deltalake"):
        check_reports(
            [report(**{EOSINK.module: {"version": None}, DELTA.module: missing})], [EOSINK, DELTA]
        )


def test_another_version_on_the_executors(monkeypatch):
    monkeypatch.setattr(Requirement, "driver_version", lambda self: "0.2.0")
    with pytest.raises(
        ExecutorEnvironmentError, match="eosink-delta 0.1.0 on the executors, 0.2.0"
    ):
        check_reports(
            [report(**{EOSINK.module: {"version": "0.2.0"}, DELTA.module: {"version": "0.1.0"}})],
            [EOSINK, DELTA],
        )


class _Spark:
    """Just what register() touches: an application id and the data source registry."""

    def __init__(self, app: str):
        self.sparkContext = type(
            "SparkContext", (), {"applicationId": app, "defaultParallelism": 2}
        )
        self.registered: list[type] = []
        self.dataSource = type("Registry", (), {"register": staticmethod(self.registered.append)})


def test_register_probes_the_executors_for_the_sources_packages(monkeypatch):
    """A source's reader runs on the executors too: a missing eosink-yt-queue there is named
    before the stream starts, not a bare ModuleNotFoundError at its first batch."""
    from importlib.metadata import EntryPoint

    import eosink.spark.datasource as datasource
    import eosink.spark.executor_env as executor_env

    queue = EntryPoint("yt-queue", "eosink_yt_queue.source:YtQueueDataSource", "eosink.sources")
    monkeypatch.setattr(datasource, "installed_sources", lambda: {"yt-queue": queue})
    probed: list[Requirement] = []

    def run_probe(spark, reqs, parallelism):
        probed.extend(reqs)
        missing = {"error": "ModuleNotFoundError: No module named 'eosink_yt_queue'"}
        return [report(**{r.module: missing if "yt_queue" in r.module else {} for r in reqs})]

    monkeypatch.setattr(executor_env, "_run_probe", run_probe)
    spark = _Spark("app-sources-probe")
    with pytest.raises(ExecutorEnvironmentError) as error:
        datasource.register(spark)
    assert "eosink_yt_queue.source" in [r.module for r in probed]
    text = str(error.value)
    assert "lacks eosink-yt-queue" in text and "source 'yt-queue'" in text, text
    assert "pip install eosink-yt-queue" in text
    assert spark.registered == []  # nothing registered, nothing read


def test_a_source_this_spark_cannot_load_is_left_out_naming_why(monkeypatch):
    """eosink-yt-queue needs pyspark's streaming data source API (Spark 4.2): on an older Spark
    its import fails. The sinks' data sources still register (a user of Spark 4.1 writes
    through them); the source is left out with a warning that says why, instead of failing
    every registration."""
    from importlib.metadata import EntryPoint

    from structlog.testing import capture_logs

    import eosink.spark.datasource as datasource
    import eosink.spark.executor_env as executor_env

    old = EntryPoint("old-spark", "pyspark.sql.no_such_module:Source", "eosink.sources")
    monkeypatch.setattr(datasource, "installed_sources", lambda: {"old-spark": old})
    probed: list[Requirement] = []

    def run_probe(spark, reqs, parallelism):
        probed.extend(reqs)
        return [report(**{r.module: {} for r in reqs})]

    monkeypatch.setattr(executor_env, "_run_probe", run_probe)
    spark = _Spark("app-old-spark")
    with capture_logs() as logs:
        names = datasource.register(spark)
    assert names == [f"eosink-{name}" for name in datasource.DATA_SOURCES]
    assert all("no_such_module" not in r.module for r in probed)
    [warning] = [e for e in logs if e["event"] == "eosink.source_unavailable"]
    assert warning["source"] == "old-spark" and "no_such_module" in warning["error"]
