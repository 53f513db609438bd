"""Fault injection: every fault kind, observed through the real YtClient and its default retries."""

import time

import pytest
import yt.wrapper as yw
from yt.wrapper import YtResponseError


def mounted_table(yt, value_type: str) -> None:
    """A mounted sorted dynamic table ``//tmp/d``: key ``k`` int64, value ``v``."""
    yt.create(
        "table",
        "//tmp/d",
        attributes={
            "dynamic": True,
            "schema": [
                {"name": "k", "type": "int64", "sort_order": "ascending"},
                {"name": "v", "type": value_type},
            ],
        },
    )
    yt.mount_table("//tmp/d", sync=True)


def statuses(emu, command):
    return [e["status"] for e in emu.requests.of(command)]


def test_error_before_leaves_no_trace(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.fail_next("create", code=402, message="injected conflict")
    with pytest.raises(YtResponseError) as e:
        yt.create("map_node", "//tmp/a")
    assert e.value.is_concurrent_transaction_lock_conflict()
    assert not yt.exists("//tmp/a")
    yt.create("map_node", "//tmp/a")  # only the next call failed


def test_error_after_applies_the_command(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.fail_next("create", when="after", code=1, message="reply error after apply")
    with pytest.raises(YtResponseError):
        yt.create("map_node", "//tmp/a")
    assert yt.exists("//tmp/a")


def test_503_before_is_retried(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.respond_503("get", times=2)
    assert yt.get("//tmp/@type") == "map_node"
    assert statuses(yt_emulator, "get") == [503, 503, 200]


def test_503_after_on_a_mutation_is_answered_by_the_response_keeper(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.respond_503("create", when="after")
    node_id = yt.create("map_node", "//tmp/a")  # would be "already exists" without the keeper
    log = yt_emulator.requests.of("create")
    assert [(e["status"], e["retry"], e.get("kept", False)) for e in log] == [
        (503, False, False),
        (200, True, True),
    ]
    assert log[0]["mutation_id"] == log[1]["mutation_id"]
    assert yt.get("//tmp/a/@id") == node_id


def test_lost_reply_before_and_after(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.fail_next("set", kind="lost_reply", when="before")
    yt.set("//tmp/x", 1)
    assert yt.get("//tmp/x") == 1
    assert statuses(yt_emulator, "set") == ["dropped", 200]
    yt_emulator.faults.lose_reply("remove")  # when="after" by default
    yt.remove("//tmp/x")  # the retry is answered from the keeper, not "no such node"
    assert not yt.exists("//tmp/x")
    log = yt_emulator.requests.of("remove")
    assert [e["status"] for e in log] == ["dropped", 200] and log[1]["kept"]


def test_duplicate_mutation_id_gets_stored_answer(yt_emulator):
    from yt.wrapper.driver import make_request

    yt = yt_emulator.client()
    params = {"type": "map_node", "path": "//tmp/k", "output_format": "yson"}
    first = make_request("create", dict(params), mutation_id="1-2-3-4", client=yt)
    second = make_request("create", dict(params), mutation_id="1-2-3-4", client=yt)
    assert first == second
    assert yt_emulator.requests.of("create")[-1]["kept"]


def test_lost_commit_reply_in_transaction_context(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.lose_reply("commit_transaction")
    with yt.Transaction():
        yt.create("table", "//tmp/t")
        yt.write_table("//tmp/t", [{"a": 1}])
    assert list(yt.read_table("//tmp/t")) == [{"a": 1}]
    commits = yt_emulator.requests.of("commit_transaction")
    dropped = [e for e in commits if e["status"] == "dropped"]
    assert len(dropped) == 1
    retry = [
        e for e in commits if e["mutation_id"] == dropped[0]["mutation_id"] and e["status"] == 200
    ]
    assert retry and retry[0]["retry"] and retry[0]["kept"]


def test_delay(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.delay("get", 0.3, times=1)
    start = time.time()
    yt.get("//tmp/@type")
    assert time.time() - start >= 0.3
    start = time.time()
    yt.get("//tmp/@type")
    assert time.time() - start < 0.3


def test_expire_transaction(yt_emulator):
    yt = yt_emulator.client()
    with pytest.raises(YtResponseError) as e:
        with yt.Transaction() as tx:
            yt.create("table", "//tmp/t")
            yt_emulator.faults.expire_transaction(tx.transaction_id)
            yt.create("table", "//tmp/t2")
    assert e.value.is_no_such_transaction()
    assert not yt.exists("//tmp/t")


def test_match_restricts_the_fault(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.fail_next("create", match={"path": "//tmp/b"})
    yt.create("map_node", "//tmp/a")
    with pytest.raises(YtResponseError):
        yt.create("map_node", "//tmp/b")
    assert yt_emulator.faults.pending() == []


def test_skip_and_a_list_of_commands_fail_the_nth_of_them(yt_emulator):
    yt = yt_emulator.client()
    rule = yt_emulator.faults.fail_next(["create", "set"], skip=2)
    yt.create("map_node", "//tmp/a")
    yt.get("//tmp/a/@id")  # another command: not counted
    yt.set("//tmp/a/@x", 1)
    with pytest.raises(YtResponseError):
        yt.create("map_node", "//tmp/b")  # the third of them
    assert (rule.fired, yt.exists("//tmp/b"), yt_emulator.faults.pending()) == (1, False, [])


def test_the_kit_store_arms_store_faults_by_request_class(yt_emulator):
    """The kit's store faults (kind, the after-th request, request classes) on YT commands."""
    from types import SimpleNamespace

    from eosink_yt_emulator.kit import KitStore

    yt = yt_emulator.client()
    store = KitStore(yt_emulator.faults)
    store.arm(SimpleNamespace(kind="lost_reply", after=2, ops=("put",)))
    yt.create("map_node", "//tmp/a")
    yt.exists("//tmp/a")  # a "head": not counted
    yt.create("map_node", "//tmp/b")  # applied, reply lost, resent: the keeper answers
    assert (store.fired, yt.exists("//tmp/b")) == (1, True)
    store.arm(SimpleNamespace(kind="error", after=1, ops=("list",)))
    with pytest.raises(YtResponseError):
        yt.list("//tmp")
    store.arm(SimpleNamespace(kind="short_write", after=5, ops=("delete",)))
    store.disarm()
    yt.remove("//tmp/a")
    assert (store.fired, yt_emulator.faults.pending()) == (2, [])


def test_write_table_503_is_retried_by_the_client(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.faults.respond_503("write_table", times=2)
    yt.write_table("//tmp/t", [{"a": 1}, {"a": 2}])
    assert yt.row_count("//tmp/t") == 2
    assert statuses(yt_emulator, "write_table") == [503, 503, 200]


def test_insert_rows_faults(yt_emulator):
    yt = yt_emulator.client()
    mounted_table(yt, "int64")
    # outside a transaction the client retries insert_rows
    yt_emulator.faults.lose_reply("insert_rows")
    yt.insert_rows("//tmp/d", [{"k": 1, "v": 1}])
    yt_emulator.faults.respond_503("insert_rows")
    yt.insert_rows("//tmp/d", [{"k": 2, "v": 2}])
    assert [r["k"] for r in yt.select_rows("k from [//tmp/d]")] == [1, 2]
    # inside a tablet transaction it does not: the caller sees the failure, redoes the tx
    yt_emulator.faults.respond_503("insert_rows")
    with pytest.raises(yw.YtError):
        with yt.Transaction(type="tablet"):
            yt.insert_rows("//tmp/d", [{"k": 3, "v": 3}])
    assert list(yt.lookup_rows("//tmp/d", [{"k": 3}])) == []
    # a lost commit reply: the retry of commit_transaction gets the stored answer
    yt_emulator.faults.lose_reply("commit_transaction")
    with yt.Transaction(type="tablet"):
        yt.insert_rows("//tmp/d", [{"k": 3, "v": 3}])
    assert list(yt.lookup_rows("//tmp/d", [{"k": 3}])) == [{"k": 3, "v": 3}]
    assert yt_emulator.requests.of("commit_transaction")[-1]["kept"]


def test_request_log(yt_emulator):
    yt = yt_emulator.client()
    yt_emulator.requests.clear()
    with yt.Transaction() as tx:
        yt.set("//tmp/@a", 1)
    log = yt_emulator.requests
    assert (
        log.commands()[:2] == ["start_transaction", "ping_transaction"]
        or "start_transaction" in log.commands()
    )
    sets = log.of("set")
    assert sets[0]["transaction_id"] == tx.transaction_id and sets[0]["method"] == "PUT"
    assert all(e["duration"] >= 0 for e in log)


# -- on_next: test code between "request received" and "command applied" -------------------


def test_on_next_runs_the_callback_before_the_command_outside_the_locks(yt_emulator):
    yt = yt_emulator.client()
    other = yt_emulator.client()
    yt.set("//tmp/x", 1)
    calls = []

    def change_it_first():
        # A request of its own to the same emulator: it would deadlock under the state lock.
        calls.append(other.get("//tmp/x"))
        other.set("//tmp/x", 2)

    yt_emulator.faults.on_next("get", change_it_first, match={"path": "//tmp/x"})
    assert yt_emulator.faults.pending()[0]["kind"] == "callback"
    assert yt.get("//tmp/@type") == "map_node"  # not matched: no call
    assert calls == []
    assert yt.get("//tmp/x") == 2  # the command ran after the callback
    assert calls == [1]
    assert yt.get("//tmp/x") == 2 and calls == [1]  # only the next call
    assert yt_emulator.faults.pending() == []
    hooked = [e for e in yt_emulator.requests.of("get") if e["fault"] == "before/callback"]
    assert len(hooked) == 1 and hooked[0]["status"] == 200


def test_on_next_times_and_a_callable_match(yt_emulator):
    yt = yt_emulator.client()
    calls = []
    yt_emulator.faults.on_next(
        "create",
        lambda: calls.append(len(calls)),
        match=lambda params: str(params.get("path")).startswith("//tmp/hooked"),
        times=2,
    )
    for name in ("plain", "hooked1", "hooked2", "hooked3"):
        yt.create("map_node", "//tmp/" + name)
    assert calls == [0, 1]
    assert sorted(yt.list("//tmp")) == ["hooked1", "hooked2", "hooked3", "plain"]


def test_on_next_with_a_failing_callback_fails_the_request_unapplied(yt_emulator):
    yt = yt_emulator.client()

    def boom():
        raise RuntimeError("callback exploded")

    yt_emulator.faults.on_next("create", boom)
    with pytest.raises(YtResponseError) as e:
        yt.create("map_node", "//tmp/a")
    assert "callback exploded" in str(e.value)
    assert not yt.exists("//tmp/a")
    yt.create("map_node", "//tmp/a")


def test_on_next_provokes_a_real_tablet_transaction_conflict(yt_emulator):
    """A competing tablet transaction commits the same key while ours is open: our commit
    meets a genuine write-write conflict (1700), and our transaction is gone."""
    yt = yt_emulator.client()
    rival = yt_emulator.client()
    mounted_table(yt, "string")

    def compete():
        with rival.Transaction(type="tablet"):
            rival.insert_rows("//tmp/d", [{"k": 1, "v": "rival"}])

    with pytest.raises(YtResponseError) as e:
        with yt.Transaction(type="tablet", ping=False) as tx:
            yt.insert_rows("//tmp/d", [{"k": 1, "v": "mine"}, {"k": 2, "v": "mine"}])
            yt_emulator.faults.on_next(
                "commit_transaction", compete, match={"transaction_id": tx.transaction_id}
            )
    assert e.value.is_tablet_transaction_lock_conflict()
    assert yt_emulator.faults.pending() == []
    commits = yt_emulator.requests.of("commit_transaction")
    mine = [c for c in commits if c["transaction_id"] == tx.transaction_id]
    assert [(c["status"], c["error_code"]) for c in mine] == [(400, 1700)]
    # nothing of ours was applied; the rival's row stands
    assert list(yt.select_rows("k, v from [//tmp/d]")) == [{"k": 1, "v": "rival"}]
    # redoing the unit in a new transaction (a later start timestamp) succeeds
    with yt.Transaction(type="tablet", ping=False):
        yt.insert_rows("//tmp/d", [{"k": 1, "v": "mine"}, {"k": 2, "v": "mine"}])
    assert [r["v"] for r in yt.select_rows("v from [//tmp/d]")] == ["mine", "mine"]


def test_on_next_is_in_process_only():
    from eosink_yt_emulator import RemoteFaults

    with pytest.raises(NotImplementedError):
        RemoteFaults("http://127.0.0.1:9").on_next("get", lambda: None)
