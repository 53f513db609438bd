"""Several writers into one table, and one writer into several tables."""

from __future__ import annotations

import os
import threading
from collections import Counter

import pytest
from conftest import TABLE
from test_faults import FAST, KIT, _prepare_and_write, assert_clean
from yt_static_helpers import leftovers, open_transactions, read_rows

from eosink.plugin import BatchContext
from eosink.testing import run_batch
from eosink.protocol import finish
from eosink.testing.local import LocalRunner

OTHER = "//home/eosink/other"


def ctx(batch_id, writer):
    return BatchContext(sink="yt-static", writer_id=writer, batch_id=batch_id)


def test_two_writers_with_overlapping_commits_both_complete(make_sink, yt, yt_emulator):
    """The first commit holds the table's locks for 5 s (its merge is slow); the other writer
    waits for them instead of failing its batch, then commits."""
    run_batch(make_sink(), ctx(0, "a"), KIT.schema(), LocalRunner(KIT.partitions_of(0)))
    yt_emulator.faults.delay("start_operation", 5.0, times=1)
    outcomes: dict[str, object] = {}

    def query(writer, batch_id):
        sink = make_sink(client_config=FAST)
        try:
            outcomes[writer] = run_batch(
                sink, ctx(batch_id, writer), KIT.schema(), LocalRunner(KIT.partitions_of(batch_id))
            ).status
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            outcomes[writer] = repr(exc)

    threads = [threading.Thread(target=query, args=(w, b)) for w, b in (("a", 1), ("b", 2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert outcomes == {"a": "committed", "b": "committed"}
    assert_clean(yt, [0, 1, 2])


def test_lock_wait_is_bounded_by_an_option(make_sink, yt, yt_emulator):
    holder = yt_emulator.client()
    run_batch(make_sink(), ctx(0, "a"), KIT.schema(), LocalRunner(KIT.partitions_of(0)))
    with holder.Transaction():
        holder.lock(TABLE, mode="exclusive")
        with pytest.raises(Exception, match="waited .* raise option lock_wait_timeout_s"):
            run_batch(
                make_sink(client_config=FAST, lock_wait_timeout_s=1.5),
                ctx(1, "b"),
                KIT.schema(),
                LocalRunner(KIT.partitions_of(1)),
            )
    assert_clean(yt, [0])


def test_state_is_kept_per_table_and_writer(make_sink, yt):
    """One writer id into two tables with a shared state_path: neither takes over the other's
    MainTx."""
    state_path = "//home/eosink/shared_state"
    first = make_sink(state_path=state_path, client_config=FAST)
    second = make_sink(path=OTHER, state_path=state_path, client_config=FAST)
    pm, state, results = _prepare_and_write(first, 0)  # its commit comes later
    assert (
        run_batch(second, ctx(0, "faults"), KIT.schema(), LocalRunner(KIT.partitions_of(0))).status
        == "committed"
    )
    assert finish(pm, ctx(0, "faults"), state, results).status == "committed"
    assert Counter(KIT.comparable(r) for r in read_rows(yt, TABLE)) == KIT.expected_rows([0], 1)
    assert Counter(KIT.comparable(r) for r in read_rows(yt, OTHER)) == KIT.expected_rows([0], 1)
    assert leftovers(yt) == [] and open_transactions(yt) == []


def test_commit_does_not_list_the_tables_folder(make_sink, yt, yt_emulator):
    """Only this writer's staging is looked at, however many other nodes share the folder."""
    for i in range(5):
        yt.create("table", f"//home/eosink/neighbour_{i}", recursive=True)
    run_batch(make_sink(), ctx(0, "w"), KIT.schema(), LocalRunner(KIT.partitions_of(0)))
    listed = [str(e["params"].get("path")) for e in yt_emulator.requests.of("list")]
    assert "//home/eosink" not in listed
    assert leftovers(yt) == []


def test_nothing_is_spilled_when_a_partition_fits_one_request(make_sink, yt, tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path))
    outcome_rows = []

    class Keep(LocalRunner):
        def __call__(self, task):
            results = super().__call__(task)
            outcome_rows.extend(r.message.spilled_bytes for r in results if r.message)
            return results

    run_batch(make_sink(), ctx(0, "w"), KIT.schema(), Keep(KIT.partitions_of(0)))
    assert outcome_rows and all(b == 0 for b in outcome_rows)


def test_spill_goes_to_sparks_local_dirs(make_sink, yt, yt_emulator, tmp_path, monkeypatch):
    """Partitions larger than one request keep what a retry needs in Spark's local dirs."""
    local = tmp_path / "spark-local"
    local.mkdir()
    monkeypatch.setenv("SPARK_LOCAL_DIRS", f"{local},{tmp_path / 'second'}")
    seen: list[str] = []

    def look():
        seen.extend(os.path.join(root, f) for root, _, files in os.walk(local) for f in files)

    yt_emulator.faults.on_next("write_table", look, times=None)
    one_row_batches = [[b.slice(i, 1) for i in range(b.num_rows)] for [b] in KIT.partitions_of(0)]
    run_batch(
        make_sink(rows_per_request=2), ctx(0, "w"), KIT.schema(), LocalRunner(one_row_batches)
    )
    yt_emulator.faults.clear()
    assert seen, "nothing was spilled into SPARK_LOCAL_DIRS"
    assert not any(os.scandir(local)) or all(not files for _, _, files in os.walk(local))
    assert_clean(yt, [0])
