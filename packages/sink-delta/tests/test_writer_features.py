"""Tables eosink's own commit writes, and the ones it refuses by the feature's name.

eosink commits blind appends (add actions, a txn, a commitInfo). A writer feature that asks
more of a commit (row tracking, in-commit timestamps, clustering...) or a feature in use that
would have to be enforced on the new files (generated and identity columns, invariants) is
refused before anything is written; tables delta-rs creates today keep working. A protocol
change committed by another writer while a batch runs is caught when the commit meets it.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from delta_helpers import rows, run
from delta_history import commit_file
from eosink_delta.log_view import LogView
from eosink_delta.sink import DeltaSink
from eosink_delta.writer_features import check_blind_append

from eosink import ConfigurationError
from eosink.crash import set_crash_handler

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True}]}


def view(protocol: dict, schema: dict = SCHEMA, configuration: dict | None = None) -> LogView:
    metadata = {"schemaString": json.dumps(schema), "configuration": configuration or {}}
    return LogView(version=3, metadata=metadata, protocol=protocol)


def features(writer: list[str], reader: list[str] | None = None) -> dict:
    protocol = {"minReaderVersion": 3 if reader is not None else 1, "minWriterVersion": 7}
    protocol["writerFeatures"] = writer
    if reader is not None:
        protocol["readerFeatures"] = reader
    return protocol


@pytest.mark.parametrize(
    "protocol, named",
    [
        (features(["rowTracking", "domainMetadata"]), "rowTracking"),
        (features(["inCommitTimestamp"]), "inCommitTimestamp"),
        (features(["clustering", "domainMetadata"]), "clustering"),
        (features(["icebergCompatV2", "columnMapping"]), "icebergCompatV2"),
        (features(["v2Checkpoint"], ["v2Checkpoint"]), "v2Checkpoint"),
        (features(["aFeatureOfTomorrow"]), "aFeatureOfTomorrow"),
        ({"minReaderVersion": 4, "minWriterVersion": 7}, "reader version 4"),
    ],
)
def test_features_a_blind_append_cannot_honour_are_refused_by_name(protocol, named):
    with pytest.raises(ConfigurationError, match=named):
        check_blind_append("/t", view(protocol))


def column(name: str, **metadata: object) -> dict:
    return {"name": name, "type": "long", "nullable": True, "metadata": metadata}


@pytest.mark.parametrize(
    "protocol, field, named",
    [
        (
            features(["generatedColumns"]),
            column("g", **{"delta.generationExpression": "1"}),
            "generatedColumns",
        ),
        (
            {"minReaderVersion": 1, "minWriterVersion": 4},
            column("g", **{"delta.generationExpression": "id + 1"}),
            "generatedColumns",
        ),
        (
            features(["identityColumns"]),
            column("i", **{"delta.identity.start": 1}),
            "identityColumns",
        ),
        (
            {"minReaderVersion": 1, "minWriterVersion": 2},
            column("v", **{"delta.invariants": '{"expression": {"expression": "v > 0"}}'}),
            "invariants",
        ),
    ],
)
def test_features_in_use_are_refused_by_name(protocol, field, named):
    schema = {"type": "struct", "fields": [*SCHEMA["fields"], field]}
    with pytest.raises(ConfigurationError, match=f"{named}.* in use .*column '{field['name']}'"):
        check_blind_append("/t", view(protocol, schema))


@pytest.mark.parametrize(
    "protocol",
    [
        {"minReaderVersion": 1, "minWriterVersion": 2},
        {"minReaderVersion": 1, "minWriterVersion": 6},  # named, none used
        features(["appendOnly", "invariants", "timestampNtz"], ["timestampNtz"]),
        features(["changeDataFeed", "deletionVectors"], ["deletionVectors"]),
    ],
)
def test_features_a_blind_append_honours_pass(protocol):
    check_blind_append("/t", view(protocol))


@pytest.mark.parametrize(
    "configuration, timestamp_ntz",
    [
        ({}, False),
        ({}, True),  # reader 3 / writer 7 with timestampNtz
        ({"delta.enableChangeDataFeed": "true"}, False),
        ({"delta.appendOnly": "true"}, False),
    ],
)
def test_tables_delta_rs_creates_take_eosinks_commits(tmp_path, configuration, timestamp_ntz):
    path = str(tmp_path / "table")
    first = pa.table(rows(0, 2))
    if timestamp_ntz:
        first = first.append_column("at", pa.array([0, 1], pa.timestamp("us")))
    write_deltalake(path, first, configuration=configuration or None)
    extra = {"at": pa.array([2, 3], pa.timestamp("us"))} if timestamp_ntz else {}
    sink = DeltaSink(path=path)
    assert run(sink, 1, [rows(1, 2, **extra)]).status == "committed"
    table = DeltaTable(path)
    assert table.to_pyarrow_table().num_rows == 4
    assert table.transaction_version("w") == 1


def test_a_protocol_change_committed_during_the_batch_is_checked_at_commit(tmp_path):
    """Another writer raises the table's protocol to row tracking after our init: our commit
    meets that commit at its version, validates the batch again and refuses it by name."""
    path = str(tmp_path / "table")
    sink = DeltaSink(path=path)
    assert run(sink, 0).status == "committed"  # version 1
    protocol = {"protocol": features(["rowTracking", "domainMetadata"])}

    def change(point: str) -> None:
        if point == "commit:checked":
            with open(commit_file(path, 2), "x") as f:
                f.write(json.dumps(protocol) + "\n")

    set_crash_handler(change)
    try:
        with pytest.raises(ConfigurationError, match="writer feature 'rowTracking'"):
            run(sink, 1)
    finally:
        set_crash_handler(None)
    assert not os.path.exists(commit_file(path, 3))
    assert DeltaTable(path).transaction_version("w") == 0


def _generated_and_invariant_tables(tmp_path) -> dict[str, tuple[str, pa.RecordBatch]]:
    """A table with a generated column (``g = id * 2``) and one with an invariant (``x > 0``),
    as delta-rs creates them, each with a batch that breaks the rule."""
    from deltalake import Field, Schema

    generated = str(tmp_path / "generated")
    DeltaTable.create(
        generated,
        Schema(
            [
                Field("id", "long"),
                Field("g", "long", metadata={"delta.generationExpression": "id * 2"}),
            ]
        ),
    )
    invariant = str(tmp_path / "invariant")
    rule = json.dumps({"expression": {"expression": "x > 0"}})
    DeltaTable.create(
        invariant,
        Schema([Field("id", "long"), Field("x", "long", metadata={"delta.invariants": rule})]),
    )
    return {
        "generatedColumns": (
            generated,
            pa.record_batch({"id": pa.array([1], pa.int64()), "g": pa.array([777], pa.int64())}),
        ),
        "invariants": (
            invariant,
            pa.record_batch({"id": pa.array([1], pa.int64()), "x": pa.array([-5], pa.int64())}),
        ),
    }


@pytest.mark.parametrize("mode", ["append", "complete"])
@pytest.mark.parametrize("feature", ["generatedColumns", "invariants"])
def test_both_modes_refuse_a_feature_in_use_before_the_write(tmp_path, mode, feature):
    """Complete mode (delta-rs' commit) refuses what the append path refuses, by name and
    before any file is written, not after the write as a race with another writer."""
    path, batch = _generated_and_invariant_tables(tmp_path)[feature]
    with pytest.raises(ConfigurationError, match=f"writer feature '{feature}' in use"):
        run(DeltaSink(path=path), 0, [batch], mode=mode)
    assert DeltaTable(path).version() == 0
    assert DeltaTable(path).to_pyarrow_table().num_rows == 0
    assert not [n for n in os.listdir(path) if n.endswith(".parquet")]
