"""The client without the ``ytsaurus-yson`` C++ bindings (pure-Python YSON, JSON structured data).

The bindings are importable in the test environment, so the scenario runs in a
subprocess in which importing ``yt_yson_bindings`` fails exactly as it does when
the package is not installed (``ModuleNotFoundError``); ``yt.yson`` then falls back
to its pure-Python implementation and the client switches structured data to JSON.
"""

import sys

if __name__ == "__main__":
    import importlib.abc

    class _BlockBindings(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "yt_yson_bindings" or name.startswith("yt_yson_bindings."):
                raise ModuleNotFoundError("No module named %r" % name, name=name)
            return None

    sys.meta_path.insert(0, _BlockBindings())

import os  # noqa: E402
import subprocess  # noqa: E402


def scenario():
    import yt.yson
    import yt.wrapper as yw
    from eosink_yt_emulator import YtEmulator

    assert yt.yson.TYPE == "PYTHON", yt.yson.TYPE
    with YtEmulator() as emu:
        for fmt in (yw.YsonFormat(require_yson_bindings=False), yw.JsonFormat()):
            yt_ = emu.client(tabular_data_format=fmt)
            emu.state.cypress  # noqa: B018
            base = "//tmp/%s" % fmt.name()
            yt_.create("map_node", base)
            # Cypress + master transactions
            with yt_.Transaction():
                yt_.create(
                    "table",
                    base + "/t",
                    attributes={
                        "schema": [{"name": "k", "type": "int64"}, {"name": "s", "type": "string"}]
                    },
                )
                yt_.set(base + "/t/@attr", {"x": [1, 2]})
                yt_.write_table(base + "/t", [{"k": 2, "s": "b"}, {"k": 1, "s": "é"}])
            assert yt_.get(base + "/t/@attr") == {"x": [1, 2]}
            assert sorted(yt_.list(base)) == ["t"]
            # static tables and operations
            yt_.run_sort(base + "/t", sort_by=["k"])
            assert [r["k"] for r in yt_.read_table(base + "/t")] == [1, 2]
            assert list(yt_.read_table(base + "/t[#1:]")) == [{"k": 2, "s": "b"}]
            # dynamic tables
            yt_.create(
                "table",
                base + "/d",
                attributes={
                    "dynamic": True,
                    "schema": [
                        {"name": "k", "type": "int64", "sort_order": "ascending"},
                        {"name": "v", "type": "string"},
                    ],
                },
            )
            yt_.mount_table(base + "/d", sync=True)
            with yt_.Transaction(type="tablet"):
                yt_.insert_rows(base + "/d", [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}])
            assert list(yt_.lookup_rows(base + "/d", [{"k": 2}])) == [{"k": 2, "v": "b"}]
            assert [r["k"] for r in yt_.select_rows("k from [%s/d] where v = 'a'" % base)] == [1]
            # faults: a lost commit reply is answered by the response keeper
            emu.faults.lose_reply("commit_transaction")
            with yt_.Transaction():
                yt_.set(base + "/@done", True)
            assert bool(yt_.get(base + "/@done"))  # YsonBoolean with the pure-Python YSON
            # //sys/transactions lists the live master transactions
            with yt_.Transaction(attributes={"title": "listed"}) as tx:
                listed = yt_.list("//sys/transactions", attributes=["title"])
                assert [str(k) for k in listed] == [tx.transaction_id], listed
                assert listed[0].attributes == {"title": "listed"}, listed
                titled = yt_.get("//sys/transactions", attributes=["title"])
                assert titled[tx.transaction_id].attributes == {"title": "listed"}, titled
            assert list(yt_.list("//sys/transactions")) == []
            # ordered tables
            yt_.create(
                "table",
                base + "/q",
                attributes={"dynamic": True, "schema": [{"name": "v", "type": "string"}]},
            )
            yt_.mount_table(base + "/q", sync=True)
            yt_.insert_rows(base + "/q", [{"v": "x"}, {"v": "y"}])
            rows = list(yt_.select_rows("[$tablet_index], [$row_index], v from [%s/q]" % base))
            key = "$$row_index" if fmt.name() == "json" else "$row_index"  # JSON escapes "$" keys
            assert [r[key] for r in rows] == [0, 1], rows
        formats = {str(e["params"].get("output_format")) for e in emu.requests.of("get")}
        assert formats == {"json"}, formats  # structured data falls back to JSON without bindings
    print("SCENARIO OK")


def test_client_without_yson_bindings():
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [src] + sys.path if p)
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "SCENARIO OK" in proc.stdout, (
        proc.stdout[-3000:] + proc.stderr[-5000:]
    )


if __name__ == "__main__":
    scenario()
