"""eosink's delta-spark engine run on Delta's own Spark connector (delta-spark 4.4 on Spark 4.2,
the Spark it is built for): keyed upserts as Delta's own MERGE with the batch's txn, and the
matrix of Delta's table features.

The project's pyspark (4.3) cannot run Delta 4.4's code, so the engine runs in one process of
its own (``delta_spark_engine_runs.py`` on the python of ``build-support/spark-env 4.2.0``, with
this process's import path after that environment's own): one JVM for every scenario, started
once for the module. That process reports what it saw; the tests here judge it, and read the
tables again with delta-rs.
"""

from __future__ import annotations

import json
import os

import delta_spark_engine_runs as runs_main
import pytest
from delta_spark_process import run_scenarios, scenario
from deltalake import DeltaTable
from delta_helpers import txns


FEATURES = sorted(runs_main.FEATURES)
SCENARIOS = [*runs_main.SCENARIOS, *(f"feature:{f}" for f in FEATURES)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every scenario, in one process of Spark 4.2 with Delta's jars."""
    root = str(tmp_path_factory.mktemp("engine-runs"))
    return run_scenarios(runs_main.__file__, SCENARIOS, root)


def refused(step, *fragments):
    assert "error" in step, f"expected a refusal, got {step}"
    assert step["error"]["type"] == "ConfigurationError", step["error"]
    for fragment in fragments:
        assert fragment in step["error"]["message"], step["error"]["message"]
    return step["error"]["message"]


def by_key(rows, key="user_id", value="v"):
    assert len({r[key] for r in rows}) == len(rows), rows
    return {r[key]: r[value] for r in rows}


def delta_rs_rows(path):
    return DeltaTable(path).to_pyarrow_table().to_pylist()


def commit_actions(path):
    """The actions of the log's commits (not of its v2 checkpoints' JSON files)."""
    log = os.path.join(path, "_delta_log")
    out = []
    for name in sorted(n for n in os.listdir(log) if len(n) == 25 and n.endswith(".json")):
        with open(os.path.join(log, name)) as f:
            out.extend((int(name[:20]), json.loads(line)) for line in f if line.strip())
    return out


def proofs(path):
    """Per commit with a txn: the txn and the writer and batch of eosink's proof beside it."""
    commits: dict[int, dict] = {}
    for version, action in commit_actions(path):
        if "txn" in action:
            commits.setdefault(version, {})["txn"] = (
                action["txn"]["appId"],
                action["txn"]["version"],
            )
        if "commitInfo" in action and action["commitInfo"].get("userMetadata"):
            proof = json.loads(json.loads(action["commitInfo"]["userMetadata"])["eosink.proof"])
            commits.setdefault(version, {})["proof"] = (proof["writer_id"], proof["batch_id"])
    return [commits[v] for v in sorted(commits)]


NO_SETTINGS = {k: None for k in runs_main.TXN_SETTINGS}


# -- keyed upserts --------------------------------------------------------------------------------


def test_upsert_stream_is_delta_merge_with_the_txn(runs):
    r = scenario(runs, "upsert_stream")
    assert r["engine"] == "delta-spark"
    assert list(zip(r["batches"], r["statuses"])) == [
        (0, "committed"),
        (1, "committed"),
        (2, "committed"),
        (2, "skipped"),
    ]
    # The first batch creates the table (its rows are the table: an append), then MERGEs.
    assert r["operations"] == ["WRITE", "MERGE", "MERGE"]
    expected = {1: "b0-1", 2: "b1-2", 3: "b2-3", 4: "b2-4", 5: "b2-5"}
    assert by_key(r["rows"]) == expected  # read by Delta's connector
    assert by_key(delta_rs_rows(r["table"])) == expected
    assert proofs(r["table"]) == [{"txn": ("users", b), "proof": ("users", b)} for b in range(3)]
    assert r["settings"] == NO_SETTINGS


def test_upsert_batches_refuse_what_delta_rs_refuses(runs):
    r = scenario(runs, "upsert_batches")
    steps = r["steps"]
    assert [steps[s].get("status") for s in ("v0", "v1", "v1_again", "ordered")] == [
        "committed",
        "committed",
        "skipped",
        "committed",
    ]
    refused(steps["doubled"], "more than once", "user_id=4", "order_by")
    refused(steps["null_key"], "null key")
    refused(steps["tied"], "same greatest seq=1")
    refused(steps["null_order"], "order_by column 'seq' is null", "user_id=6")
    assert steps["user_cached"] == {"status": "committed"} and r["still_cached"]
    expected = {1: "a2", 2: "a1", 3: "a1", 4: "new", 8: "c"}
    assert by_key(r["rows"]) == expected
    assert by_key(delta_rs_rows(r["table"])) == expected
    assert txns(r["table"]) == [("job", 0), ("job", 1), ("job", 2), ("job", 3)]
    assert r["settings"] == NO_SETTINGS


def test_txn_settings_are_not_left_in_the_session(runs):
    r = scenario(runs, "upsert_settings")
    assert r["before"] == NO_SETTINGS
    assert r["committed"] == {"status": "committed"}
    assert r["after_commit"] == NO_SETTINGS
    refused(r["refused"], "breaks a constraint", "CHECK constraint short")
    assert r["after_refusal"] == {**NO_SETTINGS, "txnVersion": None}
    # The user's own write after eosink's upserts carries no txn of eosink's.
    assert by_key(r["rows"]) == {1: "a", 7: "u"}
    assert txns(r["table"]) == [("job", 0)]


def test_two_queries_of_one_session_keep_their_own_txn(runs):
    r = scenario(runs, "upsert_concurrent")
    for name in ("qa", "qb", "ja", "jb"):
        table = r["tables"][name]
        assert proofs(table) == [{"txn": (name, b), "proof": (name, b)} for b in range(2)], name
        keys = range(3)
        assert by_key(r["rows"][name], "k") == {k: f"{name}-1" for k in keys}
    for name in ("ja", "jb"):
        assert r["jobs"][name] == [{"status": "committed"}] * 2
    assert r["settings"] == NO_SETTINGS


def test_update_mode_aggregation_through_delta_spark(runs):
    r = scenario(runs, "update_aggregation")
    assert r["statuses"] and set(r["statuses"]) == {"committed"}
    expected: dict[int, tuple[int, int]] = {}
    for e in r["events"]:
        count, total = expected.get(e["user_id"], (0, 0))
        expected[e["user_id"]] = (count + 1, total + e["amount"])
    for rows in (r["rows"], delta_rs_rows(r["table"])):
        assert {x["user_id"]: (x["events"], x["total"]) for x in rows} == expected


def test_update_mode_into_an_unkeyed_writer_is_refused(runs):
    """Appending an update-mode query's changed rows would keep every older version of them."""
    r = scenario(runs, "output_modes")
    assert r["error"] is not None
    assert "outputMode('update')" in r["error"]["message"], r["error"]
    assert "mode='upsert'" in r["error"]["message"] or "key" in r["error"]["message"]
    assert not r["table_exists"] and r["outcomes"] == 0


# -- the feature matrix ---------------------------------------------------------------------------

#: Features a table cannot be created with by the jars at hand (UniForm writes Iceberg
#: metadata through Delta's ``delta-iceberg`` jar, not in the ``delta`` set).
MAY_NOT_BE_CREATED = {"uniform"}


@pytest.mark.parametrize("feature", FEATURES)
def test_feature_matrix_appends_exactly_once(runs, feature):
    r = scenario(runs, f"feature:{feature}")
    if not r["created"]:
        assert feature in MAY_NOT_BE_CREATED, r["error"]
        pytest.skip(
            f"delta-spark cannot create a {feature} table here: {r['error']['message'][:300]}"
        )
    steps = r["steps"]
    for step in steps.values():
        if "error" in step:  # a refusal must be the engine's own, never a pointer to itself
            assert "engine='delta-spark'" not in step["error"]["message"], step
    assert steps["v0"] == {"status": "committed"}, steps["v0"]
    assert steps["v0_again"] == {"status": "skipped"}, steps["v0_again"]
    ids, versions = [1, 2], [0]
    if "v1_after_checkpoint" in steps:
        assert steps["v1_after_checkpoint"] == {"status": "committed"}
        assert steps["v1_again"] == {"status": "skipped"}
        ids, versions = [1, 2, 3], [0, 1]
    if "violating" in steps:
        refused(steps["violating"], "breaks a constraint", "nothing was committed")
    assert [p["txn"] for p in proofs(r["table"])] == [("w", v) for v in versions]
    assert [p["proof"] for p in proofs(r["table"])] == [("w", v) for v in versions]
    rows = sorted(r["rows"], key=lambda x: x["id"])
    assert [x["id"] for x in rows] == ids
    assert [x["name"] for x in rows] == ["a", "b", "c"][: len(ids)]
    if feature == "generatedColumns":
        assert [x["doubled"] for x in rows] == [2 * i for i in ids]
    if feature == "identityColumns":
        assert None not in [x["n"] for x in rows] and len({x["n"] for x in rows}) == len(ids)
    if feature == "rowTracking":
        assert None not in [x["row_id"] for x in rows] and len({x["row_id"] for x in rows}) == 2
    if feature == "timestampNtz":
        assert {x["at"] for x in rows} == {"2026-01-02T03:04:05"}
    if feature == "changeDataFeed":
        assert sorted(c["id"] for c in r["changes"] if c["_change_type"] == "insert") == ids
    assert r["settings"] == NO_SETTINGS
