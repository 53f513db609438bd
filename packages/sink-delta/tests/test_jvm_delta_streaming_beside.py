"""One table, two streaming writers: Delta's own sink (``writeStream.format("delta")``) and
eosink-delta (through ``foreachBatch`` and through the ``eosink-delta`` data source), side by
side and one after the other, each exactly once.

Delta's sink proves a batch by ``txn(appId=<query id>, version=<batch id>)``, eosink by
``txn(appId=<writer id>, version=<batch id>)`` and its proof: each skips its own replayed
batch and neither takes the other's txn for its own. Between batches delta-spark compacts
(``OPTIMIZE``), checkpoints, vacuums (``RETAIN 0 HOURS``) and sets
``delta.setTransactionRetentionDuration``. Judged by Delta's own Spark connector (in the
scenarios' process) and by delta-rs here: every input row of each writer exactly once.

Delta 4.4 runs on Spark 4.2, not on the project's pyspark 4.3, so the queries run in one
process of ``build-support/spark-env 4.2.0`` (``delta_streaming_helpers.py``), one JVM for
every scenario.
"""

from __future__ import annotations

import collections

import delta_streaming_helpers as helpers
import pytest
from delta_spark_process import run_scenarios, scenario
from deltalake import DeltaTable
from delta_helpers import txns


SCENARIOS = list(helpers.SCENARIOS)
ROWS = helpers.ROWS


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every scenario, in one process of Spark 4.2 with Delta's jars."""
    root = str(tmp_path_factory.mktemp("streaming-beside"))
    return run_scenarios(helpers.__file__, SCENARIOS, root)


def assert_exactly_once(ids, expected, who):
    """Each expected id once; nothing else."""
    counts = collections.Counter(ids)
    doubled = sorted(i for i, n in counts.items() if n > 1)
    lost = sorted(set(expected) - set(counts))
    stray = sorted(set(counts) - set(expected))
    assert not (doubled or lost or stray), f"{who}: doubled {doubled}, lost {lost}, stray {stray}"


def judge(result):
    """Delta's reads (whole and filtered) and delta-rs' (whole and filtered): every row of
    each writer once; each writer's txn once per batch it ran, and no other."""
    expected = {name: w["expected"] for name, w in result["writers"].items()}
    everything = [i for ids in expected.values() for i in ids]
    table = result["table"]
    assert_exactly_once(result["ids"], everything, "delta-spark")
    for src, ids in expected.items():
        assert_exactly_once(result["filtered"][src], ids, f"delta-spark where src = '{src}'")
    assert_exactly_once(result["ranged"], expected["E"], "delta-spark where id in E's range")

    dt = DeltaTable(table)
    assert_exactly_once(dt.to_pyarrow_table().column("id").to_pylist(), everything, "delta-rs")
    for src, ids in expected.items():
        got = dt.to_pyarrow_table(filters=[("src", "=", src)]).column("id").to_pylist()
        assert_exactly_once(got, ids, f"delta-rs where src = '{src}'")
    got = dt.to_pyarrow_table(filters=[("id", ">=", 100_000), ("id", "<", 200_000)])
    assert_exactly_once(got.column("id").to_pylist(), expected["E"], "delta-rs E's range")

    # Delta's sink records its batches under the query's id, eosink under the writer id: one
    # txn a batch id, from 0 on (the replays added none: judge_replays). A loaded machine's
    # Spark may run a batch of no new file (one input file a batch otherwise): its txn is the
    # proof of an empty batch, so a writer has at least one txn a file, never a gap.
    apps = {
        w["query_id"] if w["kind"] == "delta" else w["writer_id"]: len(w["expected"]) // ROWS
        for w in result["writers"].values()
    }
    by_app = collections.defaultdict(list)
    for app, version in txns(table):
        by_app[app].append(version)
    assert set(by_app) == set(apps)
    for app, files in apps.items():
        versions = by_app[app]
        assert versions == list(range(len(versions))) and len(versions) >= files, (app, versions)
        assert dt.transaction_version(app) == versions[-1], app


def judge_replays(result):
    """Every replay ran its batch again (the same batch id) and committed nothing; the
    ``foreachBatch`` writer reports it skipped."""
    for replay in result["replays"]:
        assert replay["last_batch_id"] == replay["batch_id"], replay
        assert replay["version_after"] == replay["version_before"], replay
    replayed = {r["batch_id"] for r in result["replays"] if r["writer"] == "E"}
    statuses = collections.defaultdict(list)
    for batch_id, status in result["writers"]["E"]["outcomes"]:
        statuses[batch_id].append(status)
    assert {b for b, s in statuses.items() if s[1:]} == replayed, statuses
    assert all(s == ["committed"] + ["skipped"] * (len(s) - 1) for s in statuses.values()), statuses


def test_side_by_side_with_delta_spark_maintenance(runs):
    result = scenario(runs, "beside")
    judge(result)
    judge_replays(result)
    operations = set(result["operations"])
    assert {"OPTIMIZE", "VACUUM END", "SET TBLPROPERTIES", "STREAMING UPDATE"} <= operations
    assert result["checkpoints"], "no checkpoint written"


def test_one_after_the_other(runs):
    result = scenario(runs, "one_after_other")
    judge(result)
    judge_replays(result)
    assert result["checkpoints"], "no checkpoint written"


def test_sink_swapped_on_one_checkpoint(runs):
    """A query moved from Delta's sink to eosink and back on its own checkpoint. After a crash
    between Delta's commit of a batch and Spark's, eosink under the query's id (the app id of
    Delta's txns) refuses to take those txns for its own, naming the fix; it writes nothing.
    After a clean stop eosink takes over under a writer id of its own, and Delta's sink
    comes back after it: every row once, each sink's batches under its own app id."""
    result = scenario(runs, "sink_swapped")
    adoption = result["adoption"]
    assert "error" in adoption, adoption
    assert "already records app id" in adoption["error"]["message"], adoption
    assert "not from eosink" in adoption["error"]["message"], adoption
    for replay in result["replays"]:
        assert replay["last_batch_id"] == replay["batch_id"], replay
        assert replay["version_after"] == replay["version_before"], replay
    assert result["outcomes"] == [[2, "committed"], [3, "committed"], [3, "skipped"]]
    assert_exactly_once(result["ids"], result["expected"], "delta-spark")
    dt = DeltaTable(result["table"])
    ids = dt.to_pyarrow_table().column("id").to_pylist()
    assert_exactly_once(ids, result["expected"], "delta-rs")
    app, writer = result["app_id"], result["writer_id"]
    expected_txns = [(app, 0), (app, 1), (writer, 2), (writer, 3), (writer, 4), (app, 5)]
    assert txns(result["table"]) == expected_txns


def test_named_query_through_the_data_source(runs):
    """``queryName`` is no sink option, but Spark hands it to the sink with the options."""
    result = scenario(runs, "named_query")
    assert result["error"] is None, result["error"]["message"][-1500:]
    assert_exactly_once(result["ids"], result["expected"], "delta-spark")
