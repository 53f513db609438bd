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
