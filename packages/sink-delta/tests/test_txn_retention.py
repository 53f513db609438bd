"""``delta.setTransactionRetentionDuration`` and eosink's txn, without Spark (with Delta's own
Spark connector: test_jvm_delta_txn_retention.py).

Both engines stamp their txn with ``lastUpdated`` (Delta's Spark connector drops a txn without
one once a retention is set), so the retention is how long a batch's evidence lives; a
retention shorter than 7 days is refused when the batch starts, with the table untouched.
"""

from __future__ import annotations

import time

import pytest
from deltalake import DeltaTable

from eosink import ConfigurationError
from eosink_delta.sink import DeltaSink
from eosink_delta.table import MIN_TXN_RETENTION, txn_retention
from delta_helpers import log_actions, log_version, rows, run, txns

RETENTION = "delta.setTransactionRetentionDuration"


def test_the_txn_carries_last_updated(tmp_path):
    path = str(tmp_path / "t")
    before = int(time.time() * 1000)
    run(DeltaSink(path=path), 0)
    run(DeltaSink(path=path), 1, mode="complete")
    stamps = [a["txn"].get("lastUpdated") for _, a in log_actions(path) if "txn" in a]
    assert len(stamps) == 2
    assert all(s is not None and before <= s <= time.time() * 1000 for s in stamps)


@pytest.mark.parametrize("retention", ["interval 1 seconds", "interval 6 days", "2 hours"])
def test_short_retention_is_refused_with_the_table_untouched(tmp_path, retention):
    path = str(tmp_path / "t")
    run(DeltaSink(path=path), 0)
    DeltaTable(path).alter.set_table_properties({RETENTION: retention})
    version = log_version(path)
    for mode in ("append", "complete"):
        with pytest.raises(ConfigurationError, match=RETENTION) as err:
            run(DeltaSink(path=path), 1, mode=mode)
        assert "at least 7 days" in str(err.value) and "SET TBLPROPERTIES" in str(err.value)
    assert log_version(path) == version and txns(path) == [("w", 0)]


def test_unreadable_retention_is_refused(tmp_path):
    path = str(tmp_path / "t")
    DeltaTable.create(path, rows(0).schema, configuration={RETENTION: "interval 1 fortnight"})
    with pytest.raises(ConfigurationError, match="not a Delta interval"):
        run(DeltaSink(path=path), 0)


def test_retention_of_seven_days_or_more_is_written_under(tmp_path):
    path = str(tmp_path / "t")
    DeltaTable.create(path, rows(0).schema, configuration={RETENTION: "interval 7 days"})
    assert run(DeltaSink(path=path), 0).status == "committed"
    assert run(DeltaSink(path=path), 0).status == "skipped"
    DeltaTable(path).create_checkpoint()  # delta-rs' checkpoint keeps the fresh txn
    assert DeltaTable(path).transaction_version("w") == 0
    assert run(DeltaSink(path=path), 0).status == "skipped"


def test_delta_intervals():
    assert txn_retention("interval 7 days") == MIN_TXN_RETENTION
    assert txn_retention("INTERVAL 1 WEEK") == MIN_TXN_RETENTION
    assert txn_retention("interval 6 days 24 hours") == MIN_TXN_RETENTION
    assert txn_retention("168 hours") == MIN_TXN_RETENTION
    assert txn_retention("interval 500 milliseconds").total_seconds() == 0.5
    assert txn_retention("interval 2 months") is None
    assert txn_retention("7") is None
    assert txn_retention("") is None
