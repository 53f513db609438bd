"""The call sequences of the two YT sinks, with the client's default retry behaviour."""

import threading

import yt.wrapper as yw
from yt.wrapper import YtResponseError

SCHEMA = [
    {"name": "id", "type": "int64"},
    {"name": "part", "type": "int64"},
    {"name": "payload", "type": "string"},
]


def test_static_sink_flow(yt_emulator):
    emu = yt_emulator
    yt = emu.client()
    yt.create("map_node", "//home/out", recursive=True)
    yt.create("table", "//home/out/target", attributes={"schema": SCHEMA})
    yt.write_table("//home/out/target", [{"id": -1, "part": -1, "payload": "old"}])
    main = yt.start_transaction(timeout=60000)
    with yt.Transaction(transaction_id=main, ping=False):
        yt.create("table", "//home/out/_tmp", attributes={"schema": SCHEMA})
    errors = []

    def write_part(part):
        try:
            c = emu.client()
            with c.Transaction(transaction_id=main, ping=False):
                with c.Transaction():  # the part transaction, nested in main
                    rows = [
                        {"id": part * 100 + i, "part": part, "payload": "p%d" % part}
                        for i in range(50)
                    ]
                    for i in range(0, 50, 10):  # several appends per part
                        c.write_table(
                            yw.TablePath("//home/out/_tmp", append=True), rows[i : i + 10]
                        )
        except Exception as e:  # pragma: no cover - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=write_part, args=(p,)) for p in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not yt.exists("//home/out/_tmp")  # nothing visible outside main
    with yt.Transaction(transaction_id=main, ping=False):
        assert yt.row_count("//home/out/_tmp") == 300
        yt.run_sort("//home/out/_tmp", sort_by=["id"])
        yt.run_merge(
            "//home/out/_tmp", "//home/out/_tmp", mode="sorted", spec={"combine_chunks": True}
        )
        assert yt.get("//home/out/_tmp/@chunk_count") == 1
        yt.move("//home/out/_tmp", "//home/out/target", force=True)
        yt.set("//home/out/target/@sink_epoch", 7)
    # the commit reply is lost; the retry (same mutation id, retry=%true) gets the kept answer
    emu.faults.lose_reply("commit_transaction", match={"transaction_id": main})
    yt.commit_transaction(main)
    rows = list(yt.read_table("//home/out/target"))
    assert [r["id"] for r in rows] == sorted(p * 100 + i for p in range(6) for i in range(50))
    assert yt.get("//home/out/target/@sink_epoch") == 7
    assert yt.get("//home/out/target/@sorted_by") == ["id"]
    assert not yt.exists("//home/out/_tmp")
    commits = [e for e in emu.requests.of("commit_transaction") if e["transaction_id"] == main]
    assert (
        [e["status"] for e in commits] == ["dropped", 200]
        and commits[1]["retry"]
        and commits[1]["kept"]
    )
    assert commits[0]["mutation_id"] == commits[1]["mutation_id"]


def test_static_sink_abort_leaves_target_untouched(yt_emulator):
    yt = yt_emulator.client()
    yt.create("table", "//tmp/target")
    yt.write_table("//tmp/target", [{"a": 1}])
    main = yt.start_transaction()
    with yt.Transaction(transaction_id=main, ping=False):
        yt.write_table("//tmp/_tmp", [{"a": 2}])
        yt.move("//tmp/_tmp", "//tmp/target", force=True)
    yt.abort_transaction(main)
    assert list(yt.read_table("//tmp/target")) == [{"a": 1}]
    assert not yt.exists("//tmp/_tmp")


def _run_tablet_tx(yt, body, attempts=5):
    for _ in range(attempts):
        try:
            with yt.Transaction(type="tablet"):
                body()
            return True
        except YtResponseError as e:
            if not (e.is_tablet_transaction_lock_conflict() or e.is_no_such_transaction()):
                raise
        except yw.YtError:
            pass  # e.g. proxy unavailable inside the transaction: redo it
    return False


def test_dynamic_sink_flow(yt_emulator):
    emu = yt_emulator
    yt = emu.client()
    schema = yw.yson.to_yson_type(
        [
            {"name": "key", "type": "string", "sort_order": "ascending"},
            {"name": "value", "type": "int64"},
            {"name": "epoch", "type": "int64"},
        ],
        attributes={"unique_keys": True},
    )
    yt.create("table", "//tmp/kv", attributes={"dynamic": True, "schema": schema})
    yt.mount_table("//tmp/kv", sync=True)
    emu.faults.respond_503("insert_rows")  # inside the tablet tx: surfaces, the sink redoes the tx
    assert _run_tablet_tx(
        yt,
        lambda: yt.insert_rows(
            "//tmp/kv", [{"key": "a", "value": 1, "epoch": 1}, {"key": "b", "value": 2, "epoch": 1}]
        ),
    )
    emu.faults.lose_reply(
        "commit_transaction"
    )  # lost commit reply: the retry gets the stored answer
    assert _run_tablet_tx(
        yt, lambda: yt.insert_rows("//tmp/kv", [{"key": "a", "epoch": 2}], update=True)
    )
    assert list(yt.lookup_rows("//tmp/kv", [{"key": "a"}])) == [
        {"key": "a", "value": 1, "epoch": 2}
    ]
    # a concurrent writer makes the first commit attempt conflict (1700); the retry succeeds
    other = emu.client()
    state = {"first": True}

    def body():
        yt.insert_rows("//tmp/kv", [{"key": "b", "value": 20, "epoch": 3}])
        if state["first"]:
            state["first"] = False
            other.insert_rows("//tmp/kv", [{"key": "b", "value": 99, "epoch": 3}])

    assert _run_tablet_tx(yt, body)
    assert list(yt.lookup_rows("//tmp/kv", [{"key": "b"}])) == [
        {"key": "b", "value": 20, "epoch": 3}
    ]
    assert [r["key"] for r in yt.select_rows("key from [//tmp/kv] where epoch >= 2")] == ["a", "b"]
    assert any(e.get("error_code") == 1700 for e in emu.requests.of("commit_transaction"))


def test_ordered_table_consumer_flow(yt_emulator):
    yt = yt_emulator.client()
    yt.create(
        "table",
        "//tmp/queue",
        attributes={"dynamic": True, "schema": [{"name": "data", "type": "string"}]},
    )
    yt.mount_table("//tmp/queue", sync=True)
    with yt.Transaction(type="tablet"):
        yt.insert_rows("//tmp/queue", [{"data": "m%d" % i} for i in range(5)])
    batch = list(
        yt.select_rows(
            "[$tablet_index], [$row_index], data from [//tmp/queue] "
            "where [$tablet_index] = 0 and [$row_index] >= 2 limit 2"
        )
    )
    assert batch == [
        {"$tablet_index": 0, "$row_index": 2, "data": "m2"},
        {"$tablet_index": 0, "$row_index": 3, "data": "m3"},
    ]
    yt.trim_rows("//tmp/queue", 0, 4)
    assert [r["$row_index"] for r in yt.select_rows("[$row_index] from [//tmp/queue]")] == [4]
