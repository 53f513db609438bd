"""Tablet transactions over HTTP as the real proxy serves them: sticky, held by one proxy.

What the real client sends (``ytsaurus-client``'s ``transaction.py``): ``Transaction(
type="tablet")`` over HTTP starts with ``sticky=%true``; ``insert_rows`` etc. under it carry
``transaction_id``; its pinger sends ``ping_transaction``; the end is ``commit_transaction``.
What the proxy does with it (ytsaurus: the driver's ``start_transaction`` command and
``TStickyTransactionPool``): a tablet transaction that is not sticky is refused ("Tablet
transactions must be sticky"); a sticky one lives in the pool of the proxy that started it,
every command naming it renews its lease, and another proxy does not know it (11000, "Sticky
transaction ... is not found"). The rows are buffered in that proxy's transaction and counted
when it commits: more than ``max_rows_per_transaction`` fail the commit with 1717
(``TooManyRowsInTransaction``, "Transaction affects too many rows").
"""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from eosink_yt_emulator import YtEmulator
from yt.wrapper import YtResponseError

SCHEMA = [
    {"name": "k", "type": "int64", "sort_order": "ascending"},
    {"name": "v", "type": "string"},
]


def make_table(yt, path="//tmp/d"):
    yt.create("table", path, recursive=True, attributes={"dynamic": True, "schema": SCHEMA})
    yt.mount_table(path, sync=True)


def test_a_tablet_transaction_that_is_not_sticky_is_refused(yt_client):
    with pytest.raises(YtResponseError, match="must be sticky"):
        yt_client.start_transaction(type="tablet")
    yt_client.abort_transaction(yt_client.start_transaction(type="tablet", sticky=True))


def test_too_many_rows_fail_the_commit_with_1717_and_nothing_is_visible(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.state.config["max_rows_per_transaction"] = 5
    make_table(yt)
    tx = yt.start_transaction(type="tablet", sticky=True)
    with yt.Transaction(transaction_id=tx, ping=False):
        yt.insert_rows("//tmp/d", [{"k": i} for i in range(3)])
        yt.insert_rows("//tmp/d", [{"k": i} for i in range(3, 6)])  # buffered: no error yet
    with pytest.raises(YtResponseError) as e:
        yt.commit_transaction(tx)
    assert e.value.error["code"] == 1717
    assert "too many rows" in str(e.value)
    assert list(yt.select_rows("k from [//tmp/d]")) == []
    # without a transaction of the caller, the command's own transaction fails at once
    with pytest.raises(YtResponseError) as e:
        yt.insert_rows("//tmp/d", [{"k": i} for i in range(6)])
    assert e.value.error["code"] == 1717


def test_every_command_naming_a_sticky_transaction_renews_its_lease(yt_emulator):
    yt = yt_emulator.client()
    make_table(yt)
    tx = yt.start_transaction(type="tablet", sticky=True, timeout=1000)
    with yt.Transaction(transaction_id=tx, ping=False):
        for k in range(4):  # 1.6 s in all, never 1 s without a command
            time.sleep(0.4)
            yt.insert_rows("//tmp/d", [{"k": k}])
    yt.commit_transaction(tx)
    assert [r["k"] for r in yt.select_rows("k from [//tmp/d]")] == [0, 1, 2, 3]
    tx = yt.start_transaction(type="tablet", sticky=True, timeout=500)
    time.sleep(0.8)
    with pytest.raises(YtResponseError) as e:
        yt.commit_transaction(tx)
    assert e.value.is_no_such_transaction()


def test_other_clients_attach_and_a_row_written_again_in_it_is_written_once(yt_emulator):
    """The transactional mode's executors: other clients attach to the driver's transaction
    by id; a retried task writes its rows into it again, which leaves each key once."""
    driver = yt_emulator.client()
    make_table(driver)
    tx = driver.start_transaction(type="tablet", sticky=True)
    for attempt in ("first", "retry"):
        task = yt_emulator.client()
        with task.Transaction(transaction_id=tx, ping=False):
            task.insert_rows("//tmp/d", [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}])
    assert list(driver.select_rows("k from [//tmp/d]")) == []  # nothing before the commit
    driver.commit_transaction(tx)
    assert list(driver.select_rows("k, v from [//tmp/d]")) == [
        {"k": 1, "v": "a"},
        {"k": 2, "v": "b"},
    ]


def test_a_sticky_transaction_lives_on_the_proxy_that_started_it():
    with YtEmulator(proxies=2) as emu:
        first, second = (emu.client(config={"proxy": {"url": p}}) for p in emu.proxies)
        assert len(set(emu.proxies)) == 2
        make_table(first)
        tx = first.start_transaction(type="tablet", sticky=True)
        with second.Transaction(transaction_id=tx, ping=False):
            with pytest.raises(YtResponseError, match="Sticky transaction .* is not found") as e:
                second.insert_rows("//tmp/d", [{"k": 1}])
        assert e.value.is_no_such_transaction()
        with first.Transaction(transaction_id=tx, ping=False):
            first.insert_rows("//tmp/d", [{"k": 2}])
        first.commit_transaction(tx)
        # master transactions and plain commands are the cluster's: any proxy serves them
        assert [r["k"] for r in second.select_rows("k from [//tmp/d]")] == [2]
        master = first.start_transaction()
        second.commit_transaction(master)
        # proxy discovery lists every proxy
        with urllib.request.urlopen(f"http://{emu.proxies[1]}/hosts") as reply:
            assert sorted(json.loads(reply.read())) == sorted(emu.proxies)
