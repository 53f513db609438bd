"""The emulator as a process (``python -m eosink_yt_emulator``), its control endpoint, the CLI."""

import pytest
from yt.wrapper import YtResponseError


def test_process_mode(yt_emulator_process):
    emu = yt_emulator_process
    yt = emu.client()
    yt.create("table", "//tmp/t", attributes={"schema": [{"name": "a", "type": "int64"}]})
    yt.write_table("//tmp/t", [{"a": 1}])
    assert list(yt.read_table("//tmp/t")) == [{"a": 1}]
    emu.faults.fail_next("get", code=500, message="injected")
    with pytest.raises(YtResponseError) as e:
        yt.get("//tmp/t/@row_count")
    assert e.value.is_resolve_error()
    emu.faults.lose_reply("commit_transaction")
    with yt.Transaction():
        yt.set("//tmp/t/@x", 1)
    assert yt.get("//tmp/t/@x") == 1
    tx = yt.start_transaction(timeout=60000)
    emu.faults.expire_transaction(tx)
    with pytest.raises(YtResponseError) as e:
        yt.ping_transaction(tx)
    assert e.value.is_no_such_transaction()
    emu.faults.delay("exists", 0.01, times=1)
    emu.faults.respond_503("exists")
    assert yt.exists("//tmp/t")
    assert emu.faults.pending() == []
    log = emu.requests
    assert any(e["status"] == "dropped" for e in log)
    assert [e["status"] for e in log if e["command"] == "exists"][-2:] == [503, 200]


def test_yt_cli(yt_emulator_process):
    import os
    import subprocess
    import sys

    # The `yt` console script of ytsaurus-client is `yt.cli.yt_binary:main`; run it with this
    # interpreter so that it works wherever the client is importable (venv, Pants sandbox).
    cli = [
        sys.executable,
        "-c",
        "import sys; from yt.cli.yt_binary import main; sys.argv[0] = 'yt'; sys.exit(main())",
    ]
    env = dict(
        os.environ,
        YT_PROXY=yt_emulator_process.proxy,
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
        YT_CONFIG_PATCHES="{enable_token=%false;apply_remote_patch_at_start=#;"
        "proxy={enable_proxy_discovery=%false}}",
    )

    def run(*args, stdin=None):
        proc = subprocess.run(
            cli + list(args), input=stdin, env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout

    run("create", "map_node", "//tmp/cli")
    run("write-table", "//tmp/cli/t", "--format", "yson", stdin="{a=1};{a=2};")
    assert run("read-table", "//tmp/cli/t", "--format", "json").split() == ['{"a":1}', '{"a":2}']
